// CUDA paths of models/wn_fused.h (compiled only with MONOFLOW_HAS_CUDA): autograd functions
// around kernels/wn_fused.cu, and the conditions under which they apply.
#pragma once

#include <torch/torch.h>

#include "models/wn_fused.h"

namespace monoflow::models::cuda {

// CUDA tensor of float/half/bfloat16, [B, 2H, T]; bias [2H] or undefined; dropout_p in [0, 1)
// (0: none).
bool fused_gate_applies(const torch::Tensor& x_in, const torch::Tensor& bias, double dropout_p);
torch::Tensor gated_activation(const torch::Tensor& x_in, const torch::Tensor& bias, double dropout_p);

// x and skip_sum float [B, H, T] (skip_sum may be undefined: zero), res_skip float/half/bfloat16
// [B, 2H, T], all CUDA and in one layout (contiguous or channels-last); bias [2H] or undefined;
// x_mask [B, 1, T].
bool fused_residual_applies(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                            const torch::Tensor& bias, const torch::Tensor& x_mask);
// with_low: x_low written by the same kernel (res_skip's dtype; a cast for float res_skip).
ResidualSkipOutput residual_skip(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                                 const torch::Tensor& bias, const torch::Tensor& x_mask, bool with_low);

// res float/half/bfloat16 [B, H, T], x float [B, H, T] in res's layout or undefined, both CUDA,
// contiguous or channels-last; bias [H] or undefined; x_mask [B, 1, T].
bool fused_masked_sum_applies(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                              const torch::Tensor& x_mask);
MaskedSumOutput masked_sum(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                           const torch::Tensor& x_mask, bool with_low, bool low_only);

// rows [N, C_in] x weight_t [C_in, C_out] + bias [C_out] (a 1x1 convolution of time rows),
// CUDA; the bias's gradient as one matrix-vector product.
torch::Tensor rows_affine(const torch::Tensor& rows, const torch::Tensor& weight_t, const torch::Tensor& bias);

}  // namespace monoflow::models::cuda
