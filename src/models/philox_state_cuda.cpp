#include "models/philox_state_cuda.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>

#include <mutex>

namespace monoflow::models::cuda {

kernels::PhiloxDropout start_dropout(double p, const torch::Device& device) {
  kernels::PhiloxDropout dropout;
  if (p <= 0) return dropout;
  dropout.enabled = true;
  dropout.keep = static_cast<float>(1.0 - p);
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(device.index()));
  std::lock_guard<std::mutex> lock(gen->mutex_);
  dropout.rng = gen->philox_cuda_state(4);  // each element's uniform: one draw of 4 in its subsequence
  return dropout;
}

void save_dropout(torch::autograd::AutogradContext* ctx, const kernels::PhiloxDropout& dropout) {
  ctx->saved_data["keep"] = dropout.enabled ? static_cast<double>(dropout.keep) : 1.0;
  if (!dropout.enabled) return;
  const at::PhiloxCudaState& s = dropout.rng;
  ctx->saved_data["rng_seed"] = static_cast<int64_t>(s.seed_.val);
  ctx->saved_data["rng_offset"] = static_cast<int64_t>(s.offset_.val);
  ctx->saved_data["rng_intragraph"] = static_cast<int64_t>(s.offset_intragraph_);
  ctx->saved_data["rng_captured"] = s.captured_;
}

kernels::PhiloxDropout saved_dropout(torch::autograd::AutogradContext* ctx) {
  kernels::PhiloxDropout dropout;
  const double keep = ctx->saved_data["keep"].toDouble();
  if (keep >= 1.0) return dropout;
  dropout.enabled = true;
  dropout.keep = static_cast<float>(keep);
  at::PhiloxCudaState& s = dropout.rng;
  s.seed_.val = static_cast<uint64_t>(ctx->saved_data["rng_seed"].toInt());
  s.offset_.val = static_cast<uint64_t>(ctx->saved_data["rng_offset"].toInt());
  s.offset_intragraph_ = static_cast<uint64_t>(ctx->saved_data["rng_intragraph"].toInt());
  s.captured_ = ctx->saved_data["rng_captured"].toBool();
  return dropout;
}

}  // namespace monoflow::models::cuda
