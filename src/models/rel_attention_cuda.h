// CUDA path of models::relative_attention (attentions.h; compiled only with MONOFLOW_HAS_CUDA):
// the three batched products and the small band products in cuBLAS, the softmax rows with the
// relative band, the mask and dropout in one kernel each way (kernels/rel_attention.cu).
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cuda {

// CUDA q, k, v [b, h, l, d] (any strides), emb_k and emb_v [1, 2w+1, d], all of one dtype
// (float32, float16 or bfloat16), mask [b, 1, l, l], all on one device.
bool fused_relative_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& emb_k, const torch::Tensor& emb_v,
                                      const torch::Tensor& mask);
torch::Tensor relative_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& emb_k, const torch::Tensor& emb_v, const torch::Tensor& mask,
                                 double dropout_p);

}  // namespace monoflow::models::cuda
