// CUDA path of LayerNorm over channels (models/modules.h; compiled only with MONOFLOW_HAS_CUDA):
// one kernel each way on the [B, C, T] layout (kernels/channel_norm.cu), no transposes.
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cuda {

// CUDA x [B, C, T] in float32, float16 or bfloat16, gamma and beta float32 [C] on the same
// device; residual (x's shape and dtype) and mask (float32 [B, 1, T], not requiring a gradient)
// on that device where defined. The output in x's dtype.
bool fused_channel_norm_applies(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                const torch::Tensor& residual = {}, const torch::Tensor& mask = {});
// mask * norm(x + residual), each of residual and mask left out where undefined.
torch::Tensor channel_layer_norm(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                 double eps, const torch::Tensor& residual = {}, const torch::Tensor& mask = {});

}  // namespace monoflow::models::cuda
