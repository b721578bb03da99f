// The CUDA generator's Philox state for the fused kernels' dropout (CUDA builds only): drawn
// once per forward call and kept in the autograd context, so that backward regenerates the
// same mask (kernels/philox_dropout.h).
#pragma once

#include <ATen/cuda/PhiloxCudaState.h>
#include <torch/torch.h>

namespace monoflow::models::cuda {

// The state for one dropout call on `device`: advances the generator by one draw of four per
// element's subsequence. Graph-safe: while a graph is captured it holds pointers that each
// replay fills.
at::PhiloxCudaState next_philox_state(const torch::Device& device);

void save_philox_state(torch::autograd::AutogradContext* ctx, const at::PhiloxCudaState& s);
at::PhiloxCudaState saved_philox_state(torch::autograd::AutogradContext* ctx);

}  // namespace monoflow::models::cuda
