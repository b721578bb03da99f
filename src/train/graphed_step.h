// The training step as CUDA graphs: one graph per padded batch shape, recorded once and then
// replayed, so that a step costs the host a handful of launches instead of thousands.
//
// What a replay does is exactly train_step's work (forward with MAS, losses, backward,
// gradient norm and clipping, Adam), with every decision that train_step takes on the host
// moved to the GPU:
//   - the learning rate and the step number are device scalars filled before each replay;
//   - MAS leaves its error flags on the device (MasOptions::deferred_flags) instead of
//     raising them;
//   - a non-finite loss (or MAS's non-finite flag) sets found_inf, and the fused Adam kernel
//     then skips the update (moments and step counts stay), as torch's GradScaler does;
//   - losses, the gradient norm and the counters (skipped updates, the longest run of them,
//     the first step of each MAS error) stay on the device until status() reads them.
// Nothing in a step waits for the GPU.
//
// Data parallelism (options.distributed with several ranks): the gradients are views of one
// flat buffer, summed by one NCCL all-reduce captured inside the graph, after backward; the
// skip decision and the losses ride along in the same buffer. Before each step the ranks agree
// on the padded shape through the host control channel (no GPU wait), so that all of them
// replay graphs of one shape, in lock-step. (The batch size may still differ for an epoch's
// last, partial batch: the all-reduce has the same size in every graph, so they still meet.)
//
// Differences from the eager step, by design: a skipped
// update is known only when status() is read, so the trainer counts it as a step; and the
// batch is padded up to its bucket (masks keep the padding out of every loss term).
//
// Shapes: the batch's text and mel lengths are rounded up to multiples of
// GraphBuckets::text_multiple / mel_multiple, and the mel length a little further where cuDNN's
// convolutions measure slow at it (bucket_lengths.h); each (B, T, S) gets its own graph, all
// sharing one memory pool. The least recently used graph is dropped beyond max_graphs.
//
//   GraphedTrainStep step(model, optimizer, step_options);
//   StepResult r = step.step(host_batch, lr, step_number);   // r valid until the next step()
//   GraphStatus s = step.status();                            // at log intervals: one wait
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "data/batch.h"
#include "models/glow_tts.h"
#include "train/fused_adam.h"
#include "train/train_step.h"

namespace monoflow::train {

struct GraphBuckets {
  int64_t text_multiple = 16;  // tokens
  int64_t mel_multiple = 64;   // frames (rounded up to a multiple of the model's n_sqz)
  size_t max_graphs = 16;
  bool measured_lengths = true;  // pad past lengths where the decoder's convolutions are slow
};

// What the device counted since the GraphedTrainStep was made (one read, one wait).
struct GraphStatus {
  int64_t skipped = 0;              // updates skipped for a non-finite loss, in total
  int64_t longest_nonfinite_run = 0;  // most consecutive skipped updates
  int64_t bad_lengths_step = 0;     // first step whose lengths MAS rejected (0: none)
  int64_t bad_lengths_item = -1;    // its item in the batch
  int64_t timeout_step = 0;         // first step whose cuda-fast hand-over timed out (0: none)
};

class GraphedTrainStep {
 public:
  // `options.check_finite` is implied; supported(device, options) must hold. `skipped_before`: skipped updates of a resumed run, so that status() counts on.
  GraphedTrainStep(models::GlowTTS model, FusedAdam& optimizer, const StepOptions& options,
                   GraphBuckets buckets = {}, int64_t skipped_before = 0);
  ~GraphedTrainStep();
  GraphedTrainStep(const GraphedTrainStep&) = delete;
  GraphedTrainStep& operator=(const GraphedTrainStep&) = delete;

  // One update from a host batch (pinned memory makes the upload asynchronous); `lr` is this
  // update's learning rate, `step` its number (1-based), recorded with device errors. The
  // result's tensors live on the device and stay valid until the next call; `finite` is
  // always true (the device decides: see status()).
  StepResult step(const data::Batch& host, double lr, int64_t step);

  // The padded device batch of the last step (the graph's inputs, ids included).
  const data::Batch& inputs() const;

  GraphStatus status();
  size_t graphs() const;

  // Whether graphs can run this step: a CUDA device and a CUDA MAS backend.
  static bool supported(const torch::Device& device, const StepOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace monoflow::train
