// Host-callable launcher of the column sums of a [N, C] row matrix: the bias gradients of the
// decoder's fused ops (a channels-last [B, C, T] gradient is [B * T, C] rows). column_sums_cuda.cpp
// holds the torch side.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace monoflow::models::kernels {

// Rows per block of the first pass: a fixed count, so that the order of the float additions,
// and with it every bit of the result, depends on the shape only, not on the GPU.
#ifndef MONOFLOW_COLUMN_SUM_ROWS
#define MONOFLOW_COLUMN_SUM_ROWS 64  // dev/cuda/column_sums_dev.cu builds others to compare
#endif
inline constexpr int64_t kColumnSumRows = MONOFLOW_COLUMN_SUM_ROWS;
inline int64_t column_sum_blocks(int64_t n) { return (n + kColumnSumRows - 1) / kColumnSumRows; }

// Whether the kernel takes C columns of T at `rows`: one block's 256 threads span a row, one
// element each, or one pack of 16 bytes each where C and the pointer allow.
template <typename T>
bool column_sums_apply(int64_t c, const void* rows);

// out[j] = sum over i of rows[i * c + j], in float, deterministic (no atomics): per block of
// kColumnSumRows rows into partials [column_sum_blocks(n), c], then those in order into out.
// With one block, out is written directly and partials may be nullptr.
template <typename T>
cudaError_t launch_column_sums(const T* rows, int64_t n, int64_t c, float* partials, float* out,
                               cudaStream_t stream);

// The second pass alone: out[j] = sum over b of partials[b * c + j], in order, for partial rows
// that another kernel wrote (the WN backward kernels sum their bias's gradient as they go:
// wn_kernels.h).
cudaError_t launch_column_finish(const float* partials, int64_t blocks, int64_t c, float* out, cudaStream_t stream);

}  // namespace monoflow::models::kernels
