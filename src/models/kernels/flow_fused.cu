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
//
// Affine coupling (v1): forward was exp, a product, a sum, the mask product, a concatenation
// and a masked sum for the log-determinant, backward about as many again, on tensors in two
// layouts (the end convolution's output is channels-last, x is not). Here a 32x32 (time,
// channel) tile goes through shared memory, so both layouts are read and written coalesced;
// the coupling's input rows likewise.
#include "models/kernels/flow_kernels.h"

#include "models/kernels/element_types.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

constexpr int kTile = 32, kTileRows = 8;

// Loads the (time, channel) tile of m and logs (out + bias) into shared memory:
// m_tile[t_local][c_local], coalesced along the channels of the channels-last `out`.
template <typename O>
__device__ __forceinline__ void load_coupling_tile(const O* __restrict__ out, const float* __restrict__ bias,
                                                   float (*m_tile)[kTile + 1], float (*l_tile)[kTile + 1], int64_t b,
                                                   int64_t t0, int64_t c0, int64_t half, int64_t time) {
  const int64_t channels = 2 * half, c = c0 + threadIdx.x;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t t = t0 + k;
    if (t < time && c < half) {
      const O* row = out + (b * time + t) * channels;
      m_tile[k][threadIdx.x] = to_float(row[c]) + bias[c];
      l_tile[k][threadIdx.x] = to_float(row[half + c]) + bias[half + c];
    }
  }
}

// Grid (ceil(T / 32), ceil(H / 32), B), block (32, 8).
template <typename O>
__global__ void coupling_forward(const float* __restrict__ x, const O* __restrict__ out,
                                 const float* __restrict__ bias, const float* __restrict__ mask, float* __restrict__ z,
                                 float* __restrict__ partial_logdet, int64_t half, int64_t time) {
  __shared__ float m_tile[kTile][kTile + 1], l_tile[kTile][kTile + 1];
  __shared__ float shared[kTile * kTileRows / 32];
  const int64_t b = blockIdx.z, t0 = int64_t(blockIdx.x) * kTile, c0 = int64_t(blockIdx.y) * kTile;
  const int64_t channels = 2 * half;
  load_coupling_tile(out, bias, m_tile, l_tile, b, t0, c0, half, time);
  __syncthreads();
  const int64_t t = t0 + threadIdx.x;
  float logdet = 0.0f;
  if (t < time) {
    const float mk = mask[b * time + t];
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int64_t c = c0 + k;
      if (c >= half) break;
      const int64_t i0 = (b * channels + c) * time + t, i1 = i0 + half * time;
      const float m = m_tile[threadIdx.x][k], logs = l_tile[threadIdx.x][k];
      z[i0] = x[i0];
      z[i1] = (m + expf(logs) * x[i1]) * mk;
      logdet += logs * mk;
    }
  }
  // Block sum over 256 threads (block_sum assumes a 1-D block index).
  const int flat = threadIdx.y * kTile + threadIdx.x;
  for (int offset = 16; offset > 0; offset /= 2) logdet += __shfl_down_sync(0xffffffffu, logdet, offset);
  if (flat % 32 == 0) shared[flat / 32] = logdet;
  __syncthreads();
  if (flat == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kTile * kTileRows / 32; ++w) sum += shared[w];
    partial_logdet[b * (gridDim.x * gridDim.y) + blockIdx.y * gridDim.x + blockIdx.x] = sum;
  }
}

template <typename O>
__global__ void coupling_backward(const float* __restrict__ z, const O* __restrict__ out,
                                  const float* __restrict__ bias, const float* __restrict__ mask,
                                  const float* __restrict__ grad_z, const float* __restrict__ grad_logdet,
                                  float* __restrict__ grad_x, O* __restrict__ grad_out, int64_t half, int64_t time) {
  __shared__ float m_tile[kTile][kTile + 1], l_tile[kTile][kTile + 1];
  const int64_t b = blockIdx.z, t0 = int64_t(blockIdx.x) * kTile, c0 = int64_t(blockIdx.y) * kTile;
  const int64_t channels = 2 * half;
  load_coupling_tile(out, bias, m_tile, l_tile, b, t0, c0, half, time);
  __syncthreads();
  // In place: m_tile becomes grad_m, l_tile grad_logs (each thread rewrites what it read).
  const int64_t t = t0 + threadIdx.x;
  if (t < time) {
    const float mk = mask[b * time + t], gl = grad_logdet[b] * mk;
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int64_t c = c0 + k;
      if (c >= half) break;
      const int64_t i0 = (b * channels + c) * time + t, i1 = i0 + half * time;
      const float logs = l_tile[threadIdx.x][k], el = expf(logs), gz = grad_z[i1] * mk;
      // x_1 from the output (kept anyway: the next flow's input) instead of a saved x: inside
      // the utterance z_1 = m + exp(logs) x_1; outside it every term below is 0.
      const float x1 = mk != 0.0f ? (z[i1] - m_tile[threadIdx.x][k]) * expf(-logs) : 0.0f;
      grad_x[i0] = grad_z[i0];
      grad_x[i1] = gz * el;
      m_tile[threadIdx.x][k] = gz;
      l_tile[threadIdx.x][k] = gz * el * x1 + gl;
    }
  }
  __syncthreads();
  const int64_t c = c0 + threadIdx.x;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t tt = t0 + k;
    if (tt < time && c < half) {
      O* row = grad_out + (b * time + tt) * channels;
      row[c] = from_float<O>(m_tile[k][threadIdx.x]);
      row[half + c] = from_float<O>(l_tile[k][threadIdx.x]);
    }
  }
}

// The coupling's input rows (v1; before, an ATen copy to ChannelsLast, a cast in the start
// product and, backward, the cast's copy and a strided add): x's first half [B, H, T] of
// [B, 2H, T] float to rows [B, T, H] of R, and backward grad_rows added into grad_x's first
// half, each through a 32x32 (time, channel) tile so that both layouts go coalesced.
// Grid (ceil(T / 32), ceil(H / 32), B), block (32, 8).
template <typename R>
__global__ void coupling_rows_forward(const float* __restrict__ x, R* __restrict__ rows, int64_t half,
                                      int64_t time) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t b = blockIdx.z, t0 = int64_t(blockIdx.x) * kTile, c0 = int64_t(blockIdx.y) * kTile;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t c = c0 + k, t = t0 + threadIdx.x;
    if (c < half && t < time) tile[k][threadIdx.x] = x[(b * 2 * half + c) * time + t];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t t = t0 + k, c = c0 + threadIdx.x;
    if (c < half && t < time) rows[(b * time + t) * half + c] = from_float<R>(tile[threadIdx.x][k]);
  }
}

template <typename R>
__global__ void coupling_rows_backward(const R* __restrict__ grad_rows, float* __restrict__ grad_x, int64_t half,
                                       int64_t time) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t b = blockIdx.z, t0 = int64_t(blockIdx.x) * kTile, c0 = int64_t(blockIdx.y) * kTile;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t t = t0 + k, c = c0 + threadIdx.x;
    if (c < half && t < time) tile[k][threadIdx.x] = to_float(grad_rows[(b * time + t) * half + c]);
  }
  __syncthreads();
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t c = c0 + k, t = t0 + threadIdx.x;
    if (c < half && t < time) grad_x[(b * 2 * half + c) * time + t] += tile[threadIdx.x][k];
  }
}

}  // namespace

int coupling_tiles(int64_t half, int64_t time) {
  return static_cast<int>(((time + kTile - 1) / kTile) * ((half + kTile - 1) / kTile));
}

template <typename O>
cudaError_t launch_coupling_forward(const float* x, const O* out, const float* bias, const float* mask, float* z,
                                    float* partial_logdet, int64_t batch, int64_t channels, int64_t time,
                                    cudaStream_t stream) {
  const int64_t half = channels / 2;
  const dim3 grid(static_cast<unsigned>((time + kTile - 1) / kTile), static_cast<unsigned>((half + kTile - 1) / kTile),
                  static_cast<unsigned>(batch));
  coupling_forward<O><<<grid, dim3(kTile, kTileRows), 0, stream>>>(x, out, bias, mask, z, partial_logdet, half, time);
  return cudaGetLastError();
}

template <typename O>
cudaError_t launch_coupling_backward(const float* z, const O* out, const float* bias, const float* mask,
                                     const float* grad_z, const float* grad_logdet, float* grad_x, O* grad_out,
                                     int64_t batch, int64_t channels, int64_t time, cudaStream_t stream) {
  const int64_t half = channels / 2;
  const dim3 grid(static_cast<unsigned>((time + kTile - 1) / kTile), static_cast<unsigned>((half + kTile - 1) / kTile),
                  static_cast<unsigned>(batch));
  coupling_backward<O><<<grid, dim3(kTile, kTileRows), 0, stream>>>(z, out, bias, mask, grad_z, grad_logdet, grad_x,
                                                                    grad_out, half, time);
  return cudaGetLastError();
}

#define MONOFLOW_COUPLING(O)                                                                                  \
  template cudaError_t launch_coupling_forward<O>(const float*, const O*, const float*, const float*, float*, \
                                                  float*, int64_t, int64_t, int64_t, cudaStream_t);          \
  template cudaError_t launch_coupling_backward<O>(const float*, const O*, const float*, const float*,        \
                                                   const float*, const float*, float*, O*, int64_t, int64_t,  \
                                                   int64_t, cudaStream_t);
MONOFLOW_COUPLING(float)
MONOFLOW_COUPLING(__half)
MONOFLOW_COUPLING(__nv_bfloat16)
#undef MONOFLOW_COUPLING

namespace {
dim3 rows_grid(int64_t batch, int64_t half, int64_t time) {
  return dim3(static_cast<unsigned>((time + kTile - 1) / kTile), static_cast<unsigned>((half + kTile - 1) / kTile),
              static_cast<unsigned>(batch));
}
}  // namespace

template <typename R>
cudaError_t launch_coupling_rows_forward(const float* x, R* rows, int64_t batch, int64_t channels, int64_t time,
                                         cudaStream_t stream) {
  const int64_t half = channels / 2;
  if (batch == 0 || half == 0 || time == 0) return cudaSuccess;
  coupling_rows_forward<R><<<rows_grid(batch, half, time), dim3(kTile, kTileRows), 0, stream>>>(x, rows, half, time);
  return cudaGetLastError();
}

template <typename R>
cudaError_t launch_coupling_rows_backward(const R* grad_rows, float* grad_x, int64_t batch, int64_t channels,
                                          int64_t time, cudaStream_t stream) {
  const int64_t half = channels / 2;
  if (batch == 0 || half == 0 || time == 0) return cudaSuccess;
  coupling_rows_backward<R><<<rows_grid(batch, half, time), dim3(kTile, kTileRows), 0, stream>>>(grad_rows, grad_x,
                                                                                                 half, time);
  return cudaGetLastError();
}

#define MONOFLOW_COUPLING_ROWS(R)                                                                                 \
  template cudaError_t launch_coupling_rows_forward<R>(const float*, R*, int64_t, int64_t, int64_t, cudaStream_t); \
  template cudaError_t launch_coupling_rows_backward<R>(const R*, float*, int64_t, int64_t, int64_t, cudaStream_t);
MONOFLOW_COUPLING_ROWS(float)
MONOFLOW_COUPLING_ROWS(__half)
MONOFLOW_COUPLING_ROWS(__nv_bfloat16)
#undef MONOFLOW_COUPLING_ROWS

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
