// Steps whose loss was not finite, eager and graphed alike: each skips its update and still
// counts as a step; the count is said, and train.max_nonfinite_steps of them in a row end the
// run with a UserError that says what to try (docs/reliability.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/graphed_step.h"

namespace monoflow::train {

class NonfiniteSteps {
 public:
  NonfiniteSteps(int64_t max_in_row, int64_t skipped) : max_in_row_(max_in_row), skipped_(skipped) {}

  int64_t skipped() const { return skipped_; }  // in total, a resumed run's included

  // An eager step (number `step`, at the loader's 0-based `epoch` and `batch`, on the batch's
  // utterances `ids`) was skipped: returns the warning to say, which names the first 8 ids.
  std::string eager_skip(int64_t step, int64_t epoch, int64_t batch, const std::vector<std::string>& ids);
  void finite() { in_row_ = 0; }

  // What graphed steps counted on the device by `step`: the warning for updates skipped since
  // the last look ("" when none); the longest run of them is what stop_at_limit checks.
  std::string device_counts(const GraphStatus& s, int64_t step);

  // Said after the warning: at train.max_nonfinite_steps in a row, a UserError (naming
  // `last_checkpoint`, if any).
  void stop_at_limit(const std::string& last_checkpoint) const;

 private:
  int64_t max_in_row_;
  int64_t skipped_;
  int64_t in_row_ = 0;
};

}  // namespace monoflow::train
