// Element-type conversions the model's kernels share: loads and stores of float, __half and
// __nv_bfloat16 with the arithmetic in float (round to nearest even on the way back), and
// 16-byte packs of them for vectorised loads and stores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
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

// V consecutive elements, loaded and stored as one access of sizeof(T) * V bytes.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load(const T* p) { return *reinterpret_cast<const Pack<T, V>*>(p); }
template <typename T, int V>
__device__ __forceinline__ void store(T* p, const Pack<T, V>& x) { *reinterpret_cast<Pack<T, V>*>(p) = x; }

// Elements of T in one 16-byte pack.
template <typename T>
constexpr int pack_of() { return 16 / sizeof(T); }

inline bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace monoflow::models::kernels
