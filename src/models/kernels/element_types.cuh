// Element-type conversions the model's kernels share: loads and stores of float, __half and
// __nv_bfloat16 with the arithmetic in float (round to nearest even on the way back).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace monoflow::models::kernels {

// One function a direction: __half and __nv_bfloat16 through their intrinsics, any other type by
// a cast.
template <typename T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return static_cast<float>(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return static_cast<T>(v);
}

}  // namespace monoflow::models::kernels
