// Many weight-normalised convolutions' weights in one kernel each way (the decoder batches
// each flow's: 9 in the ljspeech model, up to 32 per launch).
//
// Why (bf16 profile of the training step, docs/history/benchmarks-2026-11.md): every convolution computed its
// weight with _weight_norm (a kernel), then autocast cast it to bf16 and cuDNN transposed it to
// ChannelsLast (a kernel each); backward ran the casts' copies back, weight norm's backward and
// its copies: ~500 small kernels a step, ~1.9 ms in bf16 and ~0.9 ms in TF32 with the gaps.
//
// v1 (this file): one warp per output row, a grid of (row groups, weights). The warp sums the
// row's squares, then writes g * v / ||v|| straight in the convolution's dtype and layout;
// backward reads dL/dw in that dtype and layout and writes float32 dL/dv and dL/dg. Float
// arithmetic; the sums' order differs from ATen's, so values agree to a few ulp.
#include "models/kernels/weight_norm_kernels.h"

#include "models/kernels/element_types.cuh"

namespace monoflow::models::kernels {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Position in w (and grad_w) of element j = c * k + kk of v's row.
__device__ __forceinline__ int w_index(const WeightNormTensor& t, int j) {
  if (!t.kc_order) return j;
  const int c = j / t.k, kk = j - c * t.k;
  return kk * t.c_in + c;
}

template <typename T>
__global__ void weight_norm_forward(const WeightNormBatch batch) {
  const WeightNormTensor& t = batch.t[blockIdx.y];
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= t.rows) return;
  const int cols = t.c_in * t.k;
  const float* v = t.v + int64_t(row) * cols;
  float squares = 0.f;
  for (int j = lane; j < cols; j += 32) squares += v[j] * v[j];
  const float norm = sqrtf(warp_sum(squares));
  const float scale = t.g[row] / norm;
  T* w = static_cast<T*>(t.w) + int64_t(row) * cols;
  for (int j = lane; j < cols; j += 32) w[w_index(t, j)] = from_float<T>(v[j] * scale);
  if (lane == 0) t.norm[row] = norm;
}

template <typename T>
__global__ void weight_norm_backward(const WeightNormBatch batch) {
  const WeightNormTensor& t = batch.t[blockIdx.y];
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= t.rows) return;
  const int cols = t.c_in * t.k;
  const float* v = t.v + int64_t(row) * cols;
  const T* grad_w = static_cast<const T*>(t.grad_w) + int64_t(row) * cols;
  float dot = 0.f;
  for (int j = lane; j < cols; j += 32) dot += to_float(grad_w[w_index(t, j)]) * v[j];
  dot = warp_sum(dot);
  const float norm = t.norm[row], g = t.g[row];
  const float grad_g = dot / norm;
  const float scale = g / norm, along_v = grad_g / norm;
  float* grad_v = t.grad_v + int64_t(row) * cols;
  for (int j = lane; j < cols; j += 32) grad_v[j] = scale * (to_float(grad_w[w_index(t, j)]) - v[j] * along_v);
  if (lane == 0) t.grad_g[row] = grad_g;
}

dim3 grid_of(const WeightNormBatch& batch) {
  return dim3((batch.max_rows + kWarps - 1) / kWarps, batch.count);
}

}  // namespace

template <typename T>
cudaError_t launch_weight_norm_forward(const WeightNormBatch& batch, cudaStream_t stream) {
  if (batch.count == 0) return cudaSuccess;
  weight_norm_forward<T><<<grid_of(batch), kWarps * 32, 0, stream>>>(batch);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_weight_norm_backward(const WeightNormBatch& batch, cudaStream_t stream) {
  if (batch.count == 0) return cudaSuccess;
  weight_norm_backward<T><<<grid_of(batch), kWarps * 32, 0, stream>>>(batch);
  return cudaGetLastError();
}

#define MONOFLOW_WEIGHT_NORM(T)                                                                \
  template cudaError_t launch_weight_norm_forward<T>(const WeightNormBatch&, cudaStream_t);  \
  template cudaError_t launch_weight_norm_backward<T>(const WeightNormBatch&, cudaStream_t);
MONOFLOW_WEIGHT_NORM(float)
MONOFLOW_WEIGHT_NORM(__half)
MONOFLOW_WEIGHT_NORM(__nv_bfloat16)
#undef MONOFLOW_WEIGHT_NORM

}  // namespace monoflow::models::kernels
