// CUDA paths of models/flow_fused.h (compiled only with MONOFLOW_HAS_CUDA): autograd functions
// around kernels/flow_fused.cu, and the conditions under which they apply.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace monoflow::models::cuda {

// float32 CUDA x [B, C, T]; logs, bias float32 [1, C, 1]; x_mask [B, 1, T] on the same device.
bool fused_actnorm_applies(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                           const torch::Tensor& x_mask);
torch::Tensor actnorm_affine(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                             const torch::Tensor& x_mask);

// float32 CUDA x [B, C, T] with C % 4 == 0, weight float32 [4, 4], x_mask [B, 1, T].
bool fused_invconv_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);
torch::Tensor invconv_mix(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// x float32 contiguous [B, C, T] (C even), out float/half/bfloat16 channels-last [B, C, T],
// bias float32 [C], x_mask [B, 1, T], all on one CUDA device.
bool fused_coupling_applies(const torch::Tensor& x, const torch::Tensor& out, const torch::Tensor& bias,
                            const torch::Tensor& x_mask);
std::pair<torch::Tensor, torch::Tensor> coupling_affine(const torch::Tensor& x, const torch::Tensor& out,
                                                        const torch::Tensor& bias, const torch::Tensor& x_mask);

// The coupling's input for the fused transform: (x_0 as [B, C / 2, 1, T] ChannelsLast rows for
// the network, in rows_dtype (the convolutions' under autocast: the layout copy casts too), x
// itself for coupling_affine). Its backward adds the rows' gradient into the first half of
// coupling_affine's gradient of x in place, where split, cat and an add ran before. Only for x
// whose one other use is coupling_affine (whose backward makes that gradient afresh).
bool fused_coupling_input_applies(const torch::Tensor& x, const torch::Tensor& x_mask);
std::pair<torch::Tensor, torch::Tensor> coupling_input(const torch::Tensor& x, torch::ScalarType rows_dtype);

}  // namespace monoflow::models::cuda
