// Column sums of [N, C] rows in float: the bias gradients of the WN layers, the coupling's end
// layer and the start layer (one per fused op's backward, 120 a training step).
//
// Why (bf16 profile of the training step, docs/benchmarks.md): each was a matrix-vector product
// with a vector of ones (cuBLAS picked a split-K GEMV: its kernel ~5 us, a split-K reduction
// ~2 us, and a fill for the ones), then a cast to the bias's float; together ~1 ms a step, for
// ~10 MB read per call. Under autocast the product also rounded the sum to bf16.
//
// v1 (this file): two passes, no atomics, so the result is the same bit for bit on every run and
// every GPU: blocks of kColumnSumRows rows, each thread one pack of V columns of one row in
// turn (threads of a block side by side over a row, then over rows), a block's rows summed
// in shared memory in a fixed order into one partial row; a second kernel sums the partial rows
// in order. Tuned with dev/cuda/column_sums_dev.cu on an H200 (bf16 [16,384, C], in a CUDA
// graph): 64 rows a block and 32 threads down each column of the second pass took 6.2 / 4.8 /
// 4.6 us at C = 384 / 192 / 160, against 9.3-14.5 us with 128 or 256 rows or 8 threads; an
// unroll of 8 instead of 4 was slower everywhere. The three constants below can be set from
// the compiler's command line for such sweeps.
#include "models/kernels/column_sums_kernels.h"

#include "models/kernels/element_types.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace monoflow::models::kernels {
namespace {

constexpr int kThreads = 256;
#ifndef MONOFLOW_COLUMN_UNROLL
#define MONOFLOW_COLUMN_UNROLL 4
#endif
constexpr int kUnroll = MONOFLOW_COLUMN_UNROLL;

// Threads per row (one pack of V columns each) and rows in flight per block.
struct Lanes {
  int per_row, rows;
};
__host__ __device__ inline Lanes lanes_for(int64_t c, int v) {
  const int per_row = static_cast<int>(c / v);
  return {per_row, kThreads / per_row};
}

template <typename T, int V>
__global__ void column_partials(const T* __restrict__ rows, int64_t n, int64_t c, float* __restrict__ out) {
  extern __shared__ float sums[];  // [lanes.rows, c]
  const Lanes lanes = lanes_for(c, V);
  const int lane = threadIdx.x % lanes.per_row, slot = threadIdx.x / lanes.per_row;
  const int64_t first = blockIdx.x * kColumnSumRows, last = min(n, first + kColumnSumRows);
  float acc[V] = {};
  if (slot < lanes.rows) {
#pragma unroll kUnroll
    for (int64_t i = first + slot; i < last; i += lanes.rows) {
      const auto p = load<T, V>(rows + i * c + int64_t(lane) * V);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += to_float(p.v[k]);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) sums[slot * c + lane * V + k] = acc[k];
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    float s = 0.0f;
    for (int r = 0; r < lanes.rows; ++r) s += sums[r * c + j];
    out[blockIdx.x * c + j] = s;
  }
}

// A tile of 32 columns a block, kFinishGroups threads down each column, each summing every
// kFinishGroups-th partial row (independent loads in flight), then their sums in order.
#ifndef MONOFLOW_COLUMN_FINISH_GROUPS
#define MONOFLOW_COLUMN_FINISH_GROUPS 32
#endif
constexpr int kFinishGroups = MONOFLOW_COLUMN_FINISH_GROUPS;

__global__ void column_finish(const float* __restrict__ partials, int64_t blocks, int64_t c, float* __restrict__ out) {
  __shared__ float sums[kFinishGroups][32];
  const int64_t j = blockIdx.x * int64_t(32) + threadIdx.x;
  float s = 0.0f;
  if (j < c) {
#pragma unroll 4
    for (int64_t b = threadIdx.y; b < blocks; b += kFinishGroups) s += partials[b * c + j];
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < c) {
    float total = 0.0f;
#pragma unroll
    for (int g = 0; g < kFinishGroups; ++g) total += sums[g][threadIdx.x];
    out[j] = total;
  }
}

template <typename T, int V>
cudaError_t launch(const T* rows, int64_t n, int64_t c, float* partials, float* out, cudaStream_t stream) {
  const int64_t blocks = column_sum_blocks(n);
  const size_t shared = sizeof(float) * lanes_for(c, V).rows * c;
  column_partials<T, V><<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(rows, n, c,
                                                                                   blocks == 1 ? out : partials);
  if (blocks > 1) return launch_column_finish(partials, blocks, c, out, stream);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_column_finish(const float* partials, int64_t blocks, int64_t c, float* out, cudaStream_t stream) {
  column_finish<<<static_cast<unsigned>((c + 31) / 32), dim3(32, kFinishGroups), 0, stream>>>(partials, blocks, c, out);
  return cudaGetLastError();
}

template <typename T>
bool column_sums_packed(int64_t c, const void* rows) {
  constexpr int V = pack_of<T>();
  return c % V == 0 && c / V <= kThreads && aligned(rows, 16);
}

template <typename T>
bool column_sums_apply(int64_t c, const void* rows) {
  return c > 0 && (c <= kThreads || column_sums_packed<T>(c, rows));
}

template <typename T>
cudaError_t launch_column_sums(const T* rows, int64_t n, int64_t c, float* partials, float* out,
                               cudaStream_t stream) {
  if (n == 0) return cudaMemsetAsync(out, 0, sizeof(float) * c, stream);
  if (column_sums_packed<T>(c, rows)) return launch<T, pack_of<T>()>(rows, n, c, partials, out, stream);
  return launch<T, 1>(rows, n, c, partials, out, stream);
}

#define MONOFLOW_COLUMN_SUMS(T)                  \
  template bool column_sums_apply<T>(int64_t, const void*); \
  template cudaError_t launch_column_sums<T>(const T*, int64_t, int64_t, float*, float*, cudaStream_t);
MONOFLOW_COLUMN_SUMS(float)
MONOFLOW_COLUMN_SUMS(__half)
MONOFLOW_COLUMN_SUMS(__nv_bfloat16)
#undef MONOFLOW_COLUMN_SUMS

}  // namespace monoflow::models::kernels
