// What a training run writes for people to read (the layout is trainer.h's): the progress line,
// TensorBoard events, metrics.jsonl, the alignment and mel pictures in images/ and the
// validation audio in samples/. Only the rank that writes (rank 0) makes one with `writes`;
// on the others every call is a no-op, so the loop calls it on every rank alike.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "align/mas.h"
#include "train/log/image.h"
#include "train/log/metrics_log.h"
#include "train/log/progress.h"
#include "train/log/tensorboard.h"
#include "train/resume_check.h"
#include "train/validation.h"

namespace monoflow::train {

// One log line's figures (the losses averaged over the ranks).
struct StepLine {
  int64_t step = 0, epoch = 0;  // epoch 1-based
  double loss_mle = 0, loss_dur = 0, grad_norm = 0, lr = 0;
  int64_t skipped = 0;        // non-finite steps so far
  int64_t total_steps = 0;    // 0: unknown
  double seconds_left = -1;   // >= 0: --max-minutes ends the run this soon
  int64_t graphs_recorded = 0;  // since the last line: CUDA graphs recorded (train_graphs.h),
  double recording_s = 0;       // and the seconds that took (in time/step_ms, not in the ETA)
};

class RunLog {
 public:
  RunLog(bool writes, bool quiet, align::Backend backend);

  void say(const std::string& text);   // a line beside the progress bar (not when quiet)
  void tell(const std::string& text);  // the same, said even when quiet

  // The files in `dir`. A resumed run keeps metrics.jsonl and the TensorBoard events up to its
  // checkpoint's `step` (a run that went on past it left lines the resumed run will redo).
  void open(const std::filesystem::path& dir, bool tensorboard, bool resuming, int64_t step);
  // --resume on changed data: an event line per changed set at the checkpoint's `step`.
  void data_changed(const DatasetChanges& changes, int64_t step, const std::string& checkpoint);
  // Where the interval since the next line starts.
  void restart_clock(int64_t step);

  void add_mas_time(align::Backend backend, double ms);  // --compare-align: into the next line
  void step_line(const StepLine& line);
  // The training batch's MAS path of its first utterance `id`, `attn` [T, S].
  void train_alignment(const torch::Tensor& attn, const std::string& id, int64_t step);
  // `start`: when validation began; its line counts the seconds up to its files written.
  void validation(const ValidationResult& v, int64_t step, int64_t epoch, int sample_rate,
                  std::chrono::steady_clock::time_point start);
  void finish();  // ends the progress line

 private:
  using Clock = std::chrono::steady_clock;
  void image(const std::string& tag, const std::string& file, const Png& png, int64_t step);

  bool writes_, quiet_;
  align::Backend backend_;
  ProgressLine progress_;
  std::unique_ptr<EventWriter> tb_;
  std::unique_ptr<MetricsLog> metrics_;
  std::filesystem::path images_, samples_;
  Clock::time_point last_time_ = Clock::now();
  int64_t last_step_ = 0;
  std::map<align::Backend, std::pair<double, int>> mas_ms_;  // backend -> (sum, count)
  double last_mas_ms_ = 0;
};

}  // namespace monoflow::train
