// The decoder flows' elementwise work in one kernel per direction.
//
// ActNorm (v1): forward was exp, a broadcast product, a broadcast sum and the mask product
// (three passes over [B, C, T]); backward the mask product, two products and two strided
// reductions over (B, T) for the parameters. Here forward is one pass, and backward one pass
// that writes grad_x and per-(channel, batch chunk) partial sums: one block per pair, a block
// reduction, no atomics, so the result is deterministic.
//
// InvConvNear, n_split 4 (v1): forward was a permuting copy, a 4-channel cuDNN convolution (with
// its layout transposes), a permuting copy back and the mask product; backward the same
// copies plus dgrad and wgrad. Here each thread mixes one (batch, group, time) quadruple in
// registers, and backward also accumulates the 16 weight-gradient sums per block.
#include "models/kernels/flow_kernels.h"

#include <algorithm>

namespace monoflow::models::kernels {
namespace {

constexpr int kThreads = 256;

// One block per (b, c) row: coalesced over time, the channel's parameters read once.
__global__ void actnorm_forward(const float* __restrict__ x, const float* __restrict__ logs,
                                const float* __restrict__ bias, const float* __restrict__ mask, float* __restrict__ y,
                                int64_t channels, int64_t time) {
  const int64_t row = blockIdx.x, b = row / channels, c = row % channels;
  const float s = expf(logs[c]), shift = bias[c];
  const float* xr = x + row * time;
  const float* mr = mask + b * time;
  float* yr = y + row * time;
  for (int64_t t = threadIdx.x; t < time; t += blockDim.x) yr[t] = (shift + s * xr[t]) * mr[t];
}

__device__ __forceinline__ float block_sum(float v, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? shared[threadIdx.x] : 0.0f;
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  __syncthreads();
  return v;
}

// Block (c, k): channel c, batch items [k * per_chunk, (k + 1) * per_chunk).
__global__ void actnorm_backward(const float* __restrict__ x, const float* __restrict__ logs,
                                 const float* __restrict__ mask, const float* __restrict__ grad_y,
                                 float* __restrict__ grad_x, float* __restrict__ partial_logs,
                                 float* __restrict__ partial_bias, int64_t batch, int64_t channels, int64_t time) {
  __shared__ float shared[kThreads / 32];
  const int64_t c = blockIdx.x, k = blockIdx.y, chunks = gridDim.y;
  const int64_t per_chunk = (batch + chunks - 1) / chunks;
  const int64_t b0 = k * per_chunk, b1 = std::min(batch, b0 + per_chunk);
  const float s = expf(logs[c]);
  float sum_bias = 0.0f, sum_logs = 0.0f;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t row = (b * channels + c) * time;
    for (int64_t t = threadIdx.x; t < time; t += blockDim.x) {
      const float gm = grad_y[row + t] * mask[b * time + t];
      grad_x[row + t] = gm * s;
      sum_bias += gm;
      sum_logs += gm * s * x[row + t];
    }
  }
  sum_bias = block_sum(sum_bias, shared);
  sum_logs = block_sum(sum_logs, shared);
  if (threadIdx.x == 0) {
    partial_bias[c * chunks + k] = sum_bias;
    partial_logs[c * chunks + k] = sum_logs;
  }
}

constexpr int kInvRows = 4;  // (b, g) rows per backward block

__device__ __forceinline__ int64_t mixed_channel(int j, int64_t g, int64_t half) { return (j / 2) * half + g * 2 + j % 2; }

// Grid (ceil(T / threads), B * G): thread t of row (b, g).
__global__ void invconv4_forward(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ mask, float* __restrict__ z, int64_t channels,
                                 int64_t time) {
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t >= time) return;
  const int64_t groups = channels / 4, b = blockIdx.y / groups, g = blockIdx.y % groups, half = channels / 2;
  const float* xb = x + b * channels * time;
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = xb[mixed_channel(j, g, half) * time + t];
  const float m = mask[b * time + t];
  float* zb = z + b * channels * time;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    zb[mixed_channel(i, g, half) * time + t] = m * (w[i * 4 + 0] * v[0] + w[i * 4 + 1] * v[1] + w[i * 4 + 2] * v[2] +
                                                   w[i * 4 + 3] * v[3]);
  }
}

// Block k: rows [k * kInvRows, ...) of the B * G (b, g) rows, all times.
__global__ void invconv4_backward(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ mask, const float* __restrict__ grad_z,
                                  float* __restrict__ grad_x, float* __restrict__ partial_w, int64_t batch,
                                  int64_t channels, int64_t time) {
  __shared__ float shared[kThreads / 32];
  const int64_t groups = channels / 4, half = channels / 2, rows = batch * groups;
  float acc[16] = {};
  for (int64_t row = blockIdx.x * int64_t(kInvRows); row < std::min<int64_t>(rows, (blockIdx.x + 1) * int64_t(kInvRows));
       ++row) {
    const int64_t b = row / groups, g = row % groups;
    const float* xb = x + b * channels * time;
    const float* gb = grad_z + b * channels * time;
    float* gxb = grad_x + b * channels * time;
    for (int64_t t = threadIdx.x; t < time; t += blockDim.x) {
      const float m = mask[b * time + t];
      float v[4], gz[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[j] = xb[mixed_channel(j, g, half) * time + t];
        gz[j] = gb[mixed_channel(j, g, half) * time + t] * m;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        gxb[mixed_channel(j, g, half) * time + t] =
            w[0 * 4 + j] * gz[0] + w[1 * 4 + j] * gz[1] + w[2 * 4 + j] * gz[2] + w[3 * 4 + j] * gz[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i * 4 + j] += gz[i] * v[j];
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const float sum = block_sum(acc[k], shared);
    if (threadIdx.x == 0) partial_w[blockIdx.x * 16 + k] = sum;
  }
}

}  // namespace

cudaError_t launch_invconv4_forward(const float* x, const float* w, const float* mask, float* z, int64_t batch,
                                    int64_t channels, int64_t time, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((time + 127) / 128), static_cast<unsigned>(batch * (channels / 4)));
  invconv4_forward<<<grid, 128, 0, stream>>>(x, w, mask, z, channels, time);
  return cudaGetLastError();
}

cudaError_t launch_invconv4_backward(const float* x, const float* w, const float* mask, const float* grad_z,
                                     float* grad_x, float* partial_w, int64_t batch, int64_t channels, int64_t time,
                                     int* blocks_out, cudaStream_t stream) {
  const int64_t rows = batch * (channels / 4);
  const int blocks = static_cast<int>((rows + kInvRows - 1) / kInvRows);
  if (blocks_out) *blocks_out = blocks;
  if (!partial_w) return cudaSuccess;
  invconv4_backward<<<blocks, kThreads, 0, stream>>>(x, w, mask, grad_z, grad_x, partial_w, batch, channels, time);
  return cudaGetLastError();
}

cudaError_t launch_actnorm_forward(const float* x, const float* logs, const float* bias, const float* mask, float* y,
                                   int64_t batch, int64_t channels, int64_t time, cudaStream_t stream) {
  actnorm_forward<<<static_cast<unsigned>(batch * channels), 128, 0, stream>>>(x, logs, bias, mask, y, channels, time);
  return cudaGetLastError();
}

cudaError_t launch_actnorm_backward(const float* x, const float* logs, const float* mask, const float* grad_y,
                                    float* grad_x, float* partial_logs, float* partial_bias, int64_t batch,
                                    int64_t channels, int64_t time, int chunks, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(chunks));
  actnorm_backward<<<grid, kThreads, 0, stream>>>(x, logs, mask, grad_y, grad_x, partial_logs, partial_bias, batch,
                                                   channels, time);
  return cudaGetLastError();
}

}  // namespace monoflow::models::kernels
