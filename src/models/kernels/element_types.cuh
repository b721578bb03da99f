// Element-type conversions the model's kernels share: loads and stores of float, __half and
// __nv_bfloat16 with the arithmetic in float (round to nearest even on the way back).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace monoflow::models::kernels {

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }

}  // namespace monoflow::models::kernels
