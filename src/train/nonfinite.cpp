#include "train/nonfinite.h"

#include "common/error.h"

namespace monoflow::train {

std::string NonfiniteSteps::eager_skip(int64_t step, int64_t epoch, int64_t batch, const std::vector<std::string>& ids) {
  ++skipped_;
  ++in_row_;
  std::string names;  // the batch's utterances, so that a bad one can be found
  for (size_t i = 0; i < ids.size() && i < 8; ++i) names += (i ? ", " : "") + ids[i];
  if (ids.size() > 8) names += ", ... (" + std::to_string(ids.size()) + " in all)";
  return "warning: non-finite loss at step " + std::to_string(step) + " (epoch " + std::to_string(epoch + 1) +
         ", batch " + std::to_string(batch) + "; utterances " + names + "): update skipped (" +
         std::to_string(in_row_) + " in a row, " + std::to_string(skipped_) + " in total)";
}

std::string NonfiniteSteps::device_counts(const GraphStatus& s, int64_t step) {
  std::string warning;
  if (s.skipped > skipped_) {
    warning = "warning: " + std::to_string(s.skipped - skipped_) + " update(s) skipped for a non-finite loss by step " +
              std::to_string(step) + " (" + std::to_string(s.skipped) + " in total)";
    skipped_ = s.skipped;
  }
  in_row_ = s.longest_nonfinite_run;
  return warning;
}

void NonfiniteSteps::stop_at_limit(const std::string& last_checkpoint) const {
  if (in_row_ < max_in_row_) return;
  throw UserError("training stopped: the loss was non-finite for " + std::to_string(in_row_) +
                  " steps in a row (train.max_nonfinite_steps); lower train.learning_rate, check the "
                  "data, or resume from an earlier checkpoint" +
                  (last_checkpoint.empty() ? std::string() : " (last: " + last_checkpoint + ")"));
}

}  // namespace monoflow::train
