#include "train/train_step.h"

#include <limits>

#include <ATen/record_function.h>

#include "common/error.h"
#include "models/losses.h"
#include "train/precision.h"

namespace monoflow::train {

Losses forward_losses(models::GlowTTS& model, const data::Batch& b, const StepOptions& o) {
  const auto device = b.text.device();
  Losses l;
  {
    models::Bf16Autocast autocast(o.bf16, device);
    l.out = model->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, b.speakers, o.mas);
  }
  // The losses in float32 whatever the autocast dtype of the activations.
  RECORD_USER_SCOPE("monoflow::loss");  // for profiles (scripts/profile_summary.py)
  const auto& out = l.out;
  l.mle = models::mle_loss(out.z.to(torch::kFloat32), out.z_m.to(torch::kFloat32),
                           out.z_logs.to(torch::kFloat32), out.logdet.to(torch::kFloat32),
                           out.z_mask.to(torch::kFloat32));
  l.dur = models::duration_loss(out.logw.to(torch::kFloat32), out.logw_.to(torch::kFloat32), b.text_lengths);
  return l;
}

torch::Tensor clip_gradients(const std::vector<torch::Tensor>& grads, double clip) {
  if (grads.empty()) return {};
  const auto norms = at::_foreach_norm(grads, 2);
  torch::Tensor total = torch::stack(norms).norm();
  if (clip > 0) {
    at::_foreach_clamp_min_(grads, -clip);
    at::_foreach_clamp_max_(grads, clip);
  }
  return total;
}

torch::Tensor clip_gradients(const torch::Tensor& flat, double clip) {
  torch::Tensor total = flat.norm();
  if (clip > 0) flat.clamp_(-clip, clip);
  return total;
}

namespace {

bool all_finite(models::GlowTTS& model, const data::Batch& b) {
  if (!torch::isfinite(b.mel).all().item<bool>()) return false;
  for (const auto& p : model->parameters()) {
    if (!torch::isfinite(p).all().item<bool>()) return false;
  }
  return true;
}

}  // namespace

data::Batch to_device(const data::Batch& batch, const torch::Device& device) {
  data::Batch b = batch;
  const bool nb = device.is_cuda();
  b.text = batch.text.to(device, nb);
  b.text_lengths = batch.text_lengths.to(device, nb);
  b.mel = batch.mel.to(device, nb);
  b.mel_lengths = batch.mel_lengths.to(device, nb);
  if (batch.speakers.defined()) b.speakers = batch.speakers.to(device, nb);
  return b;
}

StepResult train_step(models::GlowTTS& model, torch::optim::Optimizer& optimizer, const data::Batch& batch,
                      double lr, const StepOptions& options) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
  optimizer.zero_grad(/*set_to_none=*/true);

  StepResult r;
  Losses l;
  bool local_finite = true;
  try {
    l = forward_losses(model, batch, options);
  } catch (const align::NonFiniteError&) {
    // Non-finite weights or features, or activations that overflowed, make MAS refuse its
    // input (non-finite logp) before any loss exists: that is a non-finite step, not a user
    // error.
    if (!options.check_finite) throw;
    local_finite = false;
  } catch (const UserError&) {
    // Any other error is the caller's, unless the weights or the features are not finite.
    if (!options.check_finite || all_finite(model, batch)) throw;
    local_finite = false;
  }
  torch::Tensor loss;
  if (local_finite) {
    r.loss_mle = l.mle.detach();
    r.loss_dur = l.dur.detach();
    loss = l.mle + l.dur;
    r.out = std::move(l.out);
    if (options.check_finite && !torch::isfinite(loss.detach()).item<bool>()) local_finite = false;
  } else {
    r.loss_mle = torch::full({}, std::numeric_limits<double>::quiet_NaN());
    r.loss_dur = r.loss_mle;
  }
  Distributed* dist = options.distributed != nullptr && options.distributed->world_size() > 1 ? options.distributed
                                                                                              : nullptr;
  if (options.check_finite && dist != nullptr) {
    // Every rank must take the same branch, or the gradient all-reduce below would hang.
    local_finite = dist->average(local_finite ? 1.0 : 0.0) > 1.0 - 1e-9;
  }
  if (!local_finite) {
    r.finite = false;
    return r;
  }
  GradientReducer* reducer = dist != nullptr ? options.reducer : nullptr;
  if (reducer != nullptr) reducer->prepare();
  loss.backward();
  if (reducer != nullptr) reducer->finish();
  else if (dist != nullptr) dist->average_gradients(model->parameters());

  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  {
    RECORD_USER_SCOPE("monoflow::clip_and_optimizer");  // for profiles (scripts/profile_summary.py)
    r.grad_norm = clip_gradients(grads, options.grad_clip_value);
    optimizer.step();
  }
  return r;
}

StepResult eval_step(models::GlowTTS& model, const data::Batch& batch, const StepOptions& options) {
  torch::NoGradGuard no_grad;
  Losses l = forward_losses(model, batch, options);
  StepResult r;
  r.loss_mle = l.mle;
  r.loss_dur = l.dur;
  r.out = std::move(l.out);
  return r;
}

align::StepAlignment step_alignment(const StepResult& r, const data::Batch& batch, align::Backend backend,
                                    const std::string& label) {
  align::StepAlignment step;
  step.logp = models::compute_logp(r.out.x_m.detach(), r.out.x_logs.detach(), r.out.z.detach()).to(torch::kFloat32);
  step.text_lengths = batch.text_lengths;
  step.mel_lengths = r.out.y_lengths;
  step.durations = r.out.durations;
  step.backend = backend;
  step.label = label;
  step.ids = batch.ids;
  return step;
}

}  // namespace monoflow::train
