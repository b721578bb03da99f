// Device side of kernels/philox_dropout.h: the state a kernel unpacks once, and the uniforms of
// an element block. Shared by the WN gate (wn_fused.cu) and the relative attention's softmax
// (rel_attention.cu).
#pragma once

#include <ATen/cuda/detail/UnpackRaw.cuh>
#include <curand_kernel.h>

#include <cstdint>
#include <tuple>

#include "models/kernels/philox_dropout.h"

namespace monoflow::models::kernels {

struct Dropout {
  bool enabled;
  float keep, scale;
  uint64_t seed, offset;
};

__device__ __forceinline__ Dropout unpack(const PhiloxDropout& d) {
  Dropout out{d.enabled, d.keep, 1.0f / d.keep, 0, 0};
  if (d.enabled) {
    const auto seeds = at::cuda::philox::unpack(d.rng);
    out.seed = std::get<0>(seeds);
    out.offset = std::get<1>(seeds);
  }
  return out;
}

// The four uniforms of element block `block` (elements 4 * block .. + 3): what
// curand_init(seed, block, offset) followed by curand_uniform4 returns. When offset % 4 == 0
// (PyTorch hands out offsets in steps of 4) that is one Philox evaluation at counter
// (offset / 4, block) under key seed; curand would evaluate a second block too (curand4 always
// prepares the next output), which made the gate compute-bound.
__device__ __forceinline__ float4 uniform4(const Dropout& d, uint64_t block) {
  if (d.offset % 4 != 0) {
    curandStatePhilox4_32_10_t state;
    curand_init(d.seed, block, d.offset, &state);
    return curand_uniform4(&state);
  }
  const uint64_t step = d.offset / 4;
  const uint4 counter = make_uint4(static_cast<unsigned>(step), static_cast<unsigned>(step >> 32),
                                   static_cast<unsigned>(block), static_cast<unsigned>(block >> 32));
  const uint2 key = make_uint2(static_cast<unsigned>(d.seed), static_cast<unsigned>(d.seed >> 32));
  return _curand_uniform4(curand_Philox4x32_10(counter, key));
}

// Whether element e survives, from its block's uniforms (one Philox evaluation per element: for
// kernels whose threads do not own whole blocks of four).
__device__ __forceinline__ bool keeps(const Dropout& d, uint64_t e) {
  const float4 u = uniform4(d, e / 4);
  const int lane = static_cast<int>(e % 4);
  return (lane == 0 ? u.x : lane == 1 ? u.y : lane == 2 ? u.z : u.w) < d.keep;
}

}  // namespace monoflow::models::kernels
