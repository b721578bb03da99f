// CUDA path of the decoder's weight-normalised convolutions (compiled only with
// MONOFLOW_HAS_CUDA): their effective weights all at once, kernels/weight_norm.cu.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace monoflow::models::cuda {

// g * v / ||v|| (norm over all dims but 0) for CUDA float32 v [o, c, k] and g [o, 1, 1], by one
// kernel per 32 weights each way, with autograd. Weights come in `dtype` (float, or the
// autocast dtype) and, where k > 1, in ChannelsLast order: strides (k * c, 1, c), whose
// unsqueeze(2) is the ChannelsLast [o, c, 1, k] cuDNN reads for time rows.
std::vector<torch::Tensor> batched_weight_norm(const std::vector<torch::Tensor>& vs,
                                               const std::vector<torch::Tensor>& gs, torch::ScalarType dtype);

// Whether batched_weight_norm takes these (CUDA, float32, contiguous, 3-D v, a kernel dtype).
bool batched_weight_norm_applies(const std::vector<torch::Tensor>& vs, const std::vector<torch::Tensor>& gs,
                                 torch::ScalarType dtype);

}  // namespace monoflow::models::cuda
