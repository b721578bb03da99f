// The progress line: step, epoch, losses, learning rate, steps/s, MAS time and ETA (training),
// or items done of a known number, their rate and ETA (align).
// On a terminal it is a live bar redrawn in place; otherwise (logs) one plain line per report.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace monoflow::train {

struct ProgressInfo {
  int64_t step = 0;
  int64_t total_steps = 0;  // 0: unknown (no ETA, no bar)
  int64_t epoch = 0;
  double loss_mle = 0, loss_dur = 0;
  double lr = 0;
  double steps_per_s = 0;
  double mas_ms = 0;  // 0: not measured (only --compare-align times MAS), not shown
  int64_t skipped = 0;  // non-finite steps so far
  double seconds_left = -1;  // >= 0: the run's time limit (--max-minutes) ends it this soon
  // CUDA graphs recorded since the last line (new shapes, or shapes again with cuDNN's search)
  // and the seconds that took: a one-off cost per shape, left out of steps_per_s so that the
  // ETA is the steps'.
  int64_t graphs_recorded = 0;
  double recording_s = 0;
};

// A job over a known number of items: "[####......] 120/283 utterances | 15.2 utterances/s | ETA 11s".
struct CountProgress {
  int64_t done = 0;
  int64_t total = 0;
  std::string unit = "items";
  double per_s = 0;  // items per second so far (0: unknown, no ETA)
};

std::string format_eta(double seconds);  // "1h02m", "3m05s", "42s", "?"
std::string format_progress(const ProgressInfo& p, bool with_bar);
std::string format_count_progress(const CountProgress& p, bool with_bar);

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* stream);  // live when `stream` is a terminal
  void update(const ProgressInfo& p);
  void update(const CountProgress& p);
  void message(const std::string& text);      // a normal line that does not break the bar
  void finish();
  bool live() const { return live_; }

 private:
  void show(const std::string& text);  // redrawn in place when live, else a line of its own

  std::FILE* stream_;
  bool live_;
  bool dirty_ = false;
};

}  // namespace monoflow::train
