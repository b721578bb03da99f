// The Glow-TTS training losses (the original commons.mle_loss and commons.duration_loss), on
// the tensors of models::GlowTTSOutput:
//   auto l_mle = models::mle_loss(out.z, out.z_m, out.z_logs, out.logdet, out.z_mask);
//   auto l_dur = models::duration_loss(out.logw, out.logw_, batch.text_lengths);
// Both reduce in float32 at least (bfloat16/half inputs are upcast).
#pragma once

#include <torch/torch.h>

namespace monoflow::models {

// Negative log-likelihood per mel element (the original commons.mle_loss):
// (sum(z_logs) + 0.5 * sum(exp(-2 z_logs) (z - z_m)^2) - sum(logdet)) / (sum(z_mask) * n_mels)
//   + 0.5 * log(2 pi).
// float32 CPU tensors take one pass each way (mle_loss_cpu.h), others the composite below.
torch::Tensor mle_loss(const torch::Tensor& z, const torch::Tensor& z_m, const torch::Tensor& z_logs,
                       const torch::Tensor& logdet, const torch::Tensor& z_mask);
// The composite of the original's ops, with their arithmetic and dtype.
torch::Tensor mle_loss_reference(const torch::Tensor& z, const torch::Tensor& z_m, const torch::Tensor& z_logs,
                                 const torch::Tensor& logdet, const torch::Tensor& z_mask);
// sum((logw - logw_)^2) / sum(x_lengths) (the original commons.duration_loss).
torch::Tensor duration_loss(const torch::Tensor& logw, const torch::Tensor& logw_, const torch::Tensor& x_lengths);

}  // namespace monoflow::models
