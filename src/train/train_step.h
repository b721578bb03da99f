// One Glow-TTS training step, shared by the trainer and bench_train_step:
// zero grads, forward (MAS inside, on logp's device), MLE + duration loss, backward, gradient
// value clipping, Adam step at the given learning rate. No host synchronisation unless the
// finiteness check is on (one boolean read after the forward).
#pragma once

#include <torch/torch.h>

#include "align/mas.h"
#include "align/mas_compare.h"
#include "data/batch.h"
#include "models/glow_tts.h"
#include "train/distributed/distributed.h"
#include "train/distributed/gradient_reducer.h"

namespace monoflow::train {

struct StepOptions {
  align::MasOptions mas;
  double grad_clip_value = 5.0;  // <= 0: no clipping
  bool bf16 = false;             // autocast (CUDA only)
  bool check_finite = true;      // skip backward and update when the loss is NaN/inf
  // Data parallelism (null or world_size 1: none). The finiteness decision is shared (every
  // rank skips when any rank's loss is non-finite) and the gradients are averaged over ranks
  // after backward, before the norm and clipping, so every rank makes the same update.
  Distributed* distributed = nullptr;
  // With `distributed`: averages the gradients during backward instead of after it.
  GradientReducer* reducer = nullptr;
};

struct StepResult {
  torch::Tensor loss_mle;   // scalar, detached, on the model's device
  torch::Tensor loss_dur;
  torch::Tensor grad_norm;  // total 2-norm of the gradients before clipping (undefined if skipped)
  bool finite = true;       // false: the update was skipped
  models::GlowTTSOutput out;  // the forward's tensors (for alignment images and --compare-align)
};

// The forward (MAS inside) and both losses, in float32 whatever the autocast dtype.
struct Losses {
  torch::Tensor mle, dur;
  models::GlowTTSOutput out;
};
Losses forward_losses(models::GlowTTS& model, const data::Batch& batch, const StepOptions& options);

// Total 2-norm of the gradients before clipping, then each clamped to [-clip, clip] (clip <= 0:
// no clamping). Device work only. Undefined when `grads` is empty.
torch::Tensor clip_gradients(const std::vector<torch::Tensor>& grads, double clip);
// The same for gradients that all lie in one tensor (GraphedTrainStep's flat buffer): one norm
// and one clamp kernel instead of a multi-tensor launch per ~100 parameters and op. The norm
// equals the list's up to float rounding (one sum instead of a sum of per-tensor norms).
torch::Tensor clip_gradients(const torch::Tensor& flat, double clip);

// The batch must already be on the model's device.
StepResult train_step(models::GlowTTS& model, torch::optim::Optimizer& optimizer, const data::Batch& batch,
                      double lr, const StepOptions& options);

// Forward + losses only, no gradient (validation, DDI).
StepResult eval_step(models::GlowTTS& model, const data::Batch& batch, const StepOptions& options);

// --compare-align's input (align/mas_compare.h): the step's log-likelihood in float32, its
// lengths and its own durations, from `backend`. `batch`: the step's device batch.
align::StepAlignment step_alignment(const StepResult& r, const data::Batch& batch, align::Backend backend,
                                    const std::string& label);

// The batch's tensors moved to `device` (non-blocking from pinned memory).
data::Batch to_device(const data::Batch& batch, const torch::Device& device);

}  // namespace monoflow::train
