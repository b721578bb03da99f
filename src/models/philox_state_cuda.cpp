#include "models/philox_state_cuda.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>

#include <mutex>

namespace monoflow::models::cuda {

at::PhiloxCudaState next_philox_state(const torch::Device& device) {
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(device.index()));
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->philox_cuda_state(4);  // each element's uniform: one draw of 4 in its subsequence
}

void save_philox_state(torch::autograd::AutogradContext* ctx, const at::PhiloxCudaState& s) {
  ctx->saved_data["rng_seed"] = static_cast<int64_t>(s.seed_.val);
  ctx->saved_data["rng_offset"] = static_cast<int64_t>(s.offset_.val);
  ctx->saved_data["rng_intragraph"] = static_cast<int64_t>(s.offset_intragraph_);
  ctx->saved_data["rng_captured"] = s.captured_;
}

at::PhiloxCudaState saved_philox_state(torch::autograd::AutogradContext* ctx) {
  at::PhiloxCudaState s;
  s.seed_.val = static_cast<uint64_t>(ctx->saved_data["rng_seed"].toInt());
  s.offset_.val = static_cast<uint64_t>(ctx->saved_data["rng_offset"].toInt());
  s.offset_intragraph_ = static_cast<uint64_t>(ctx->saved_data["rng_intragraph"].toInt());
  s.captured_ = ctx->saved_data["rng_captured"].toBool();
  return s;
}

}  // namespace monoflow::models::cuda
