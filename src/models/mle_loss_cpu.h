// Glow-TTS's MLE loss (losses.h) on the CPU in float32, one pass each way: the composite takes
// ~10 passes over the [B, n_mels, T] tensors forward (the scale, exp, difference, square,
// products, sums and a tensor of ones for the count) and as many backward: 2-3 ms of a ~165-ms
// aligner step on one core go (docs/benchmarks.md, "On the CPU"). Each row's sums are its own,
// added in row order in double, so the value is the same for any thread count.
// tests/models/test_losses.cpp holds it to the composite.
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cpu {

// Whether mle_loss_cpu takes them: float32 CPU tensors z, z_m, z_logs [B, C, T], logdet [B] and
// z_mask [B, 1, T].
bool mle_loss_cpu_applies(const torch::Tensor& z, const torch::Tensor& z_m, const torch::Tensor& z_logs,
                          const torch::Tensor& logdet, const torch::Tensor& z_mask);

// (sum(z_logs) + 0.5 sum(exp(-2 z_logs) (z - z_m)^2) - sum(logdet)) / (C sum(z_mask)) + 0.5 log(2 pi),
// a 0-dim float32 tensor, with the gradients of z, z_m, z_logs and logdet.
torch::Tensor mle_loss_cpu(const torch::Tensor& z, const torch::Tensor& z_m, const torch::Tensor& z_logs,
                           const torch::Tensor& logdet, const torch::Tensor& z_mask);

}  // namespace monoflow::models::cpu
