// The trainer's CUDA graphs (run.cuda_graphs on a GPU, docs/architecture.md, "The step"):
// whether they run, the line that says how, the steps, and each log step's losses read back
// one step behind, so that reading them never leaves the GPU idle.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "data/batch.h"
#include "models/glow_tts.h"
#include "train/fused_adam.h"
#include "train/graphed_step.h"
#include "train/train_step.h"

namespace monoflow::train {

class TrainGraphs {
 public:
  // run.cuda_graphs, a GPU, and a step the graphs can run (a CUDA MAS backend).
  static bool wanted(bool cuda_graphs, const torch::Device& device, const StepOptions& options);

  // `skipped`: updates a resumed run skipped before, so that the device counts on; `search`:
  // run.cudnn_search.
  TrainGraphs(models::GlowTTS model, FusedAdam& optimizer, const StepOptions& options, int64_t skipped,
              CudnnSearch search);

  std::string description(int64_t n_sqz) const;  // how batch shapes become graphs, in one line
  // What recording them has cost so far, in one line (the run's end says it).
  std::string recording_summary() const;
  GraphRecording recording() const { return graphed_.recording(); }

  StepResult step(const data::Batch& host, double lr, int64_t step) { return graphed_.step(host, lr, step); }
  const data::Batch& inputs() const { return graphed_.inputs(); }
  GraphStatus status() { return graphed_.status(); }  // waits for every step enqueued

  // A log step: its losses and the device's counters start on their way to the host.
  void start_readback(int64_t step, int64_t epoch);
  struct Readback {
    int64_t step = 0, epoch = 0;
    GraphReadback values;
  };
  // The readback under way, if any (call it after queueing the next step).
  std::optional<Readback> finish_readback();

  // MAS errors the device recorded, with the step that raised them: a UserError (lengths) or
  // an internal error (a cuda-fast hand-over that timed out).
  static void check_errors(const GraphStatus& s);

 private:
  static GraphBuckets buckets_for(CudnnSearch search);

  GraphBuckets buckets_;
  GraphedTrainStep graphed_;
  int64_t readback_step_ = 0, readback_epoch_ = 0;  // 0: none under way
};

}  // namespace monoflow::train
