// Device helpers shared by the cuda-fast kernels (and by the older versions in
// dev/cuda/mas_fast.cu): asynchronous copies, acquire/release progress counters, the swizzled
// tile layout, and length reads.
#pragma once

#include <cstdint>

#include "align/kernels/mas_kernels.h"

namespace monoflow::align::kernels {

constexpr unsigned kFullMask = 0xffffffffu;

// Chunk timing for dev/cuda/mas_fast.cu (built with -DMONOFLOW_MAS_TRACE only): clock64()
// of item 0's warps at the start of each 32-column chunk, [warp][chunk]; the fused kernel
// also marks when each chunk's tile has arrived (slot kTraceArrival + chunk) and its walk
// (slots kTraceChunks - 2, start, and - 1, end, of warp 0). The harness defines mas_trace;
// a trace build compiles it with the kernels' .cu files in relocatable device code
// (-rdc=true, see its header).
constexpr int kTraceArrival = 256;
#ifdef MONOFLOW_MAS_TRACE
constexpr int kTraceWarps = 16, kTraceChunks = 512;
extern __device__ long long mas_trace[kTraceWarps * kTraceChunks];
#define MONOFLOW_TRACE(item, warp, slot, lane)                                                    \
  if ((lane) == 0 && (item) == 0 && (warp) < kTraceWarps && (slot) < kTraceChunks) \
    mas_trace[(warp) * kTraceChunks + (slot)] = clock64();
#else
#define MONOFLOW_TRACE(item, warp, slot, lane)
#endif

// Length of item b, int32 or int64 storage, clamped so that int arithmetic cannot overflow
// (out-of-range values stay out of range and are rejected).
__device__ __forceinline__ int length_at(DeviceLengths l, int b) {
  const long long v = l.wide ? static_cast<const long long*>(l.data)[b]
                             : static_cast<long long>(static_cast<const int*>(l.data)[b]);
  return static_cast<int>(v < -1 ? -1 : (v > (1 << 30) ? (1 << 30) : v));
}

__device__ __forceinline__ bool lengths_valid(int text_len, int mel_len, int max_text, int max_mel) {
  return text_len >= 1 && mel_len >= text_len && text_len <= max_text && mel_len <= max_mel;
}

__device__ __forceinline__ void cp_async16(float* smem, const float* gmem, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(float* smem, const float* gmem, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(int* p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ float component(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Tile element (row, col) of a 32K x 32 tile: 16-byte groups of a row are XOR-swizzled by
// the owning lane (row / K), so the 8 lanes of a quarter-warp reading their own rows at the
// same column group hit 8 different bank groups.
template <int K>
__device__ __forceinline__ int tile_index(int row, int col) {
  return row * 32 + ((((col >> 2) ^ (row / K)) & 7) << 2) + (col & 3);
}

// Issues the copies of rows [x0, x0+32K) x columns [y0, y0+32) of one item into `tile`,
// coalesced (VEC=4: 8 lanes per 128-byte row segment; VEC=1: a warp per row). Cells
// outside the item's lengths are zero-filled without being read. A rolled loop: unrolled,
// this code alone overflows the instruction cache once per chunk.
template <int K, int VEC>
__device__ __forceinline__ void load_tile(float* tile, const float* item, int max_mel, int x0,
                                          int y0, int text_len, int mel_len, int lane) {
  if constexpr (VEC == 4) {
    const int col = (lane & 7) * 4, sub = lane >> 3;
    const int bytes = 4 * max(0, min(4, mel_len - (y0 + col)));
    const float* src = item + static_cast<int64_t>(x0 + sub) * max_mel + y0 + col;
    const int64_t step = 4 * static_cast<int64_t>(max_mel);
#pragma unroll 4
    for (int it = 0; it < 8 * K; ++it, src += step) {
      const int row = it * 4 + sub;
      const int n = (x0 + row < text_len) ? bytes : 0;
      cp_async16(tile + tile_index<K>(row, col), n ? src : item, n);
    }
  } else {
    const bool col_in = y0 + lane < mel_len;
    const float* src = item + static_cast<int64_t>(x0) * max_mel + y0 + lane;
#pragma unroll 4
    for (int row = 0; row < 32 * K; ++row, src += max_mel) {
      const int n = (col_in && x0 + row < text_len) ? 4 : 0;
      cp_async4(tile + tile_index<K>(row, lane), n ? src : item, n);
    }
  }
}

}  // namespace monoflow::align::kernels
