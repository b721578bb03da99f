// LayerNorm over channels of a contiguous [B, C, T] float32 tensor, forward and backward.
//
// Why (profile of the training step, docs/history/benchmarks-2026-11.md): at::layer_norm normalises the last
// dimension, so the text side's 17 LayerNorms a step moved the channels last and back, a copy
// each way forward and backward around ATen's kernels (~1.2 ms a step on an H100 with the
// gamma/beta reduction). Here a block covers 32 time columns of one item: threadIdx.x the
// column (consecutive addresses for each channel), threadIdx.y one of 8 channel groups; the
// column sums meet in shared memory.
//
// v1: two passes for the statistics as the original's composite (mean, then the mean of
// squared deviations), a third to write. Backward recomputes x_hat from the kept mean and
// rstd; gamma's and beta's gradients are per-tile partial sums, one row per block, reduced by
// the caller in a fixed order.
// v2 (this file): optionally the sublayer's residual sum on load (x + r, as the add kernel
// rounded it) and the sequence mask on the output, so the encoder layer's add, its mask
// product and the products' backwards are no kernels of their own; the backward reads x and r
// again instead of a kept sum.
// v3 (this file): x, the residual, y and the gradients in float, __half or __nv_bfloat16 (the
// text side under bf16 autocast); the sum x + r, the statistics, gamma, beta, the mask and the
// partial sums in float, each output rounded once.
#include "models/kernels/channel_norm_kernels.h"

#include "models/kernels/element_types.cuh"

namespace monoflow::models::kernels {
namespace {

constexpr int kColumns = kChannelNormColumns;
constexpr int kGroups = 8;  // channel groups per block (threadIdx.y)

// The sum over the block's channel groups of each column's partial `v`: every thread of the
// column gets it.
__device__ __forceinline__ float column_sum(float v, float (*shared)[kColumns + 1]) {
  shared[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) total += shared[g][threadIdx.x];
  __syncthreads();  // before the shared array is reused
  return total;
}

// x[at] + r[at] in float, or x[at] without a residual: the normalised input.
template <typename T>
__device__ __forceinline__ float input_at(const T* __restrict__ x, const T* __restrict__ r, int64_t at) {
  return r != nullptr ? to_float(x[at]) + to_float(r[at]) : to_float(x[at]);
}

template <typename T>
__global__ void channel_norm_forward(const T* __restrict__ x, const T* __restrict__ residual,
                                     const float* __restrict__ mask, const float* __restrict__ gamma,
                                     const float* __restrict__ beta, T* __restrict__ y, float* __restrict__ mean_out,
                                     float* __restrict__ rstd_out, int64_t c, int64_t t, float eps) {
  __shared__ float shared[kGroups][kColumns + 1];
  const int64_t b = blockIdx.y, col = blockIdx.x * int64_t(kColumns) + threadIdx.x;
  const bool valid = col < t;
  const int64_t at = b * c * t + col;
  float s = 0.0f;
  if (valid) {
    for (int64_t ch = threadIdx.y; ch < c; ch += kGroups) s += input_at(x, residual, at + ch * t);
  }
  const float mean = column_sum(s, shared) / float(c);
  float v = 0.0f;
  if (valid) {
    for (int64_t ch = threadIdx.y; ch < c; ch += kGroups) {
      const float d = input_at(x, residual, at + ch * t) - mean;
      v += d * d;
    }
  }
  const float rstd = rsqrtf(column_sum(v, shared) / float(c) + eps);
  if (!valid) return;
  const float m = mask != nullptr ? mask[b * t + col] : 1.0f;
  for (int64_t ch = threadIdx.y; ch < c; ch += kGroups) {
    const float out = (input_at(x, residual, at + ch * t) - mean) * rstd * gamma[ch] + beta[ch];
    y[at + ch * t] = from_float<T>(mask != nullptr ? out * m : out);
  }
  if (threadIdx.y == 0) {
    mean_out[b * t + col] = mean;
    rstd_out[b * t + col] = rstd;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__global__ void channel_norm_backward(const T* __restrict__ grad_y, const T* __restrict__ x,
                                      const T* __restrict__ residual, const float* __restrict__ mask,
                                      const float* __restrict__ gamma, const float* __restrict__ mean_in,
                                      const float* __restrict__ rstd_in, T* __restrict__ grad_x,
                                      float* __restrict__ grad_gamma_rows, float* __restrict__ grad_beta_rows,
                                      int64_t c, int64_t t) {
  __shared__ float shared[kGroups][kColumns + 1];
  const int64_t b = blockIdx.y, col = blockIdx.x * int64_t(kColumns) + threadIdx.x;
  const bool valid = col < t;
  const int64_t at = b * c * t + col;
  const float mean = valid ? mean_in[b * t + col] : 0.0f, rstd = valid ? rstd_in[b * t + col] : 0.0f;
  // The output's gradient before the mask: zero in masked columns.
  const float m = valid && mask != nullptr ? mask[b * t + col] : 1.0f;
  const auto grad_at = [&](int64_t i) { return mask != nullptr ? to_float(grad_y[i]) * m : to_float(grad_y[i]); };
  // One row of partial sums per block; each channel belongs to one warp (threadIdx.y), whose
  // 32 lanes are the block's columns.
  const int64_t row = (b * gridDim.x + blockIdx.x) * c;
  float s1 = 0.0f, s2 = 0.0f;
  for (int64_t ch = threadIdx.y; ch < c; ch += kGroups) {
    const float dy = valid ? grad_at(at + ch * t) : 0.0f;
    const float x_hat = valid ? (input_at(x, residual, at + ch * t) - mean) * rstd : 0.0f;
    const float g = dy * gamma[ch];
    s1 += g;
    s2 += g * x_hat;
    const float dgamma = warp_sum(dy * x_hat), dbeta = warp_sum(dy);
    if (threadIdx.x == 0) {
      grad_gamma_rows[row + ch] = dgamma;
      grad_beta_rows[row + ch] = dbeta;
    }
  }
  const float mean_g = column_sum(s1, shared) / float(c), mean_g_x_hat = column_sum(s2, shared) / float(c);
  if (!valid) return;
  for (int64_t ch = threadIdx.y; ch < c; ch += kGroups) {
    const float x_hat = (input_at(x, residual, at + ch * t) - mean) * rstd;
    grad_x[at + ch * t] = from_float<T>(rstd * (grad_at(at + ch * t) * gamma[ch] - mean_g - x_hat * mean_g_x_hat));
  }
}

dim3 grid_of(int64_t b, int64_t t) {
  return dim3(static_cast<unsigned>((t + kColumns - 1) / kColumns), static_cast<unsigned>(b));
}

}  // namespace

template <typename T>
cudaError_t launch_channel_norm_forward(const T* x, const T* residual, const float* mask, const float* gamma,
                                        const float* beta, T* y, float* mean, float* rstd, int64_t b, int64_t c,
                                        int64_t t, float eps, cudaStream_t stream) {
  if (b * c * t == 0) return cudaSuccess;
  channel_norm_forward<T><<<grid_of(b, t), dim3(kColumns, kGroups), 0, stream>>>(x, residual, mask, gamma, beta, y, mean,
                                                                               rstd, c, t, eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_channel_norm_backward(const T* grad_y, const T* x, const T* residual, const float* mask,
                                         const float* gamma, const float* mean, const float* rstd, T* grad_x,
                                         float* grad_gamma_rows, float* grad_beta_rows, int64_t b, int64_t c,
                                         int64_t t, cudaStream_t stream) {
  if (b * c * t == 0) return cudaSuccess;
  channel_norm_backward<T><<<grid_of(b, t), dim3(kColumns, kGroups), 0, stream>>>(
      grad_y, x, residual, mask, gamma, mean, rstd, grad_x, grad_gamma_rows, grad_beta_rows, c, t);
  return cudaGetLastError();
}

#define MONOFLOW_CHANNEL_NORM(T)                                                                              \
  template cudaError_t launch_channel_norm_forward<T>(const T*, const T*, const float*, const float*, const float*, \
                                                      T*, float*, float*, int64_t, int64_t, int64_t, float,        \
                                                      cudaStream_t);                                              \
  template cudaError_t launch_channel_norm_backward<T>(const T*, const T*, const T*, const float*, const float*,   \
                                                       const float*, const float*, T*, float*, float*, int64_t,    \
                                                       int64_t, int64_t, cudaStream_t);
MONOFLOW_CHANNEL_NORM(float)
MONOFLOW_CHANNEL_NORM(__half)
MONOFLOW_CHANNEL_NORM(__nv_bfloat16)
#undef MONOFLOW_CHANNEL_NORM

}  // namespace monoflow::models::kernels
