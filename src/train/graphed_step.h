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
// flat buffer, summed by NCCL all-reduces captured inside the graph, bucket by bucket, most of
// them while backward still runs (FlatGradientAverage); the skip decision and the losses ride
// along in the same buffer. Before each step the ranks agree
// on the padded shape through the host control channel (no GPU wait), so that all of them
// replay graphs of one shape, in lock-step. (The batch size may still differ for an epoch's
// last, partial batch: the all-reduce has the same size in every graph, so they still meet.)
//
// Differences from the eager step, by design: a skipped
// update is known only when status() is read, so the trainer counts it as a step; and the
// batch is padded up to its bucket (masks keep the padding out of every loss term).
//
// Shapes: the batch's text and mel lengths are rounded up to multiples of
// GraphBuckets::text_multiple / mel_multiple; each (B, T, S) gets its own graph, all sharing one
// memory pool. The least recently used graph is dropped beyond max_graphs. A shape is recorded
// with cuDNN's heuristics first, and again with its algorithm search once its replays have
// repaid one (cudnn_search.h); that recording pads the mel length a little further where the
// decoder's convolutions measure slow (bucket_lengths.h).
//
//   GraphedTrainStep step(model, optimizer, step_options);
//   StepResult r = step.step(host_batch, lr, step_number);   // r valid until the next step()
//   GraphStatus s = step.status();                            // at log intervals: one wait
//   step.start_readback(); ...next step()...; step.finish_readback();   // or: no idle GPU
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <numeric>

#include "data/batch.h"
#include "models/glow_tts.h"
#include "train/cudnn_search.h"
#include "train/fused_adam.h"
#include "train/train_step.h"

namespace monoflow::train {

struct GraphBuckets {
  int64_t text_multiple = 16;  // tokens
  int64_t mel_multiple = 64;   // frames (rounded up to a multiple of the model's n_sqz)
  size_t max_graphs = 16;
  bool measured_lengths = true;  // pad past lengths where the decoder's convolutions are slow
  // Several ranks: the gradients' all-reduce buckets (FlatGradientAverage). The first holds
  // the losses too and starts only after backward, so it is the small one.
  int64_t gradient_bucket_bytes = 25 << 20;
  int64_t first_gradient_bucket_bytes = 4 << 20;
  // When a shape gets cuDNN's algorithm search, and its length measured (cudnn_search.h).
  // Several ranks search every shape at once: they must agree on its padded length.
  CudnnSearch cudnn_search = CudnnSearch::kAuto;

  // The frames' multiple a model with `n_sqz` gets: the decoder squeezes n_sqz frames into one.
  int64_t mel_multiple_for(int64_t n_sqz) const { return std::lcm(mel_multiple, n_sqz); }
};

// What the device counted since the GraphedTrainStep was made (one read, one wait).
struct GraphStatus {
  int64_t skipped = 0;              // updates skipped for a non-finite loss, in total
  int64_t longest_nonfinite_run = 0;  // most consecutive skipped updates
  int64_t bad_lengths_step = 0;     // first step whose lengths MAS rejected (0: none)
  int64_t bad_lengths_item = -1;    // its item in the batch
  int64_t timeout_step = 0;         // first step whose cuda-fast hand-over timed out (0: none)
};

// What recording the graphs has cost so far, in host time (which waits for the GPU's part):
// measuring bucket lengths (bucket_lengths.h), the warm-ups (where cuDNN searches algorithms for
// each new convolution shape, when it does) and the captures. A fixed cost per shape, which a
// short run feels.
struct GraphRecording {
  int64_t graphs = 0;  // recorded (a dropped shape recorded again counts again, as does a searched one)
  int64_t searched = 0;  // of them, recorded with cuDNN's algorithm search
  double lengths_ms = 0, warm_up_ms = 0, capture_ms = 0;
  double total_ms() const { return lengths_ms + warm_up_ms + capture_ms; }
};

// A step's losses (the ranks' mean), gradient norm and the status after it, on the host.
struct GraphReadback {
  double loss_mle = 0, loss_dur = 0, grad_norm = 0;
  GraphStatus status;
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

  GraphStatus status();  // now: waits for every step enqueued
  // The same and the losses, read without draining the queue: start_readback() copies them
  // to the host after the last step enqueued, and finish_readback() waits for that copy only,
  // so a trainer that calls it after enqueueing the next step keeps the GPU busy meanwhile.
  void start_readback();
  GraphReadback finish_readback();
  size_t graphs() const;
  GraphRecording recording() const;
  // Several ranks: the gradient buckets, and how many of them the last recorded graph starts
  // during backward (all but the first, where backward fills them in order). 0 and 0 otherwise.
  int gradient_buckets() const;
  int buckets_started_in_backward() const;

  // Whether graphs can run this step: a CUDA device and a CUDA MAS backend.
  static bool supported(const torch::Device& device, const StepOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace monoflow::train
