// The WaveNet layer's residual and skip sums on the CPU in float32, one pass each way: where the
// composite (residual_skip_reference, masked_sum_reference) adds, masks and splits res_skip into
// halves forward, and backward multiplies by the mask again and concatenates the halves'
// gradients. tests/models/test_wn_fused.cpp holds them to the references; docs/benchmarks.md
// ("On the CPU") has the figures.
#pragma once

#include <torch/torch.h>

#include "models/wn_fused.h"

namespace monoflow::models::cpu {

// Whether residual_skip_cpu takes x and skip_sum [B, H, T], res_skip [B, 2H, T] and x_mask
// [B, 1, T]: float32 CPU tensors of those shapes.
bool residual_skip_cpu_applies(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                               const torch::Tensor& x_mask);
// x_out = (x + res) * x_mask, skip_out = skip_sum + skip for res_skip's halves (res, skip), with
// the gradients of x, skip_sum and res_skip. x_low is x_out (the CPU casts nothing).
ResidualSkipOutput residual_skip_cpu(const torch::Tensor& x, const torch::Tensor& skip_sum,
                                     const torch::Tensor& res_skip, const torch::Tensor& x_mask);

// Whether masked_sum_cpu takes res [B, H, T], x (the same shape, or undefined) and x_mask
// [B, 1, T]: float32 CPU tensors.
bool masked_sum_cpu_applies(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& x_mask);
// (x + res) * x_mask, x optional, with the gradients of x and res.
torch::Tensor masked_sum_cpu(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& x_mask);

}  // namespace monoflow::models::cpu
