// Host-callable launchers of the batched weight norm (raw pointers, a stream, no torch headers;
// weight_norm_cuda.cpp is the torch side). Many weight-normalised convolutions' effective
// weights in one launch each way, written in the dtype and layout their convolutions read.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace monoflow::models::kernels {

// One weight: v [rows, c_in, k] and g [rows] float32, w = g * v / ||v|| per row (the norm over
// c_in and k, as torch.nn.utils.weight_norm with dim 0). w is written in T as [rows, c_in, k]
// (kc_order 0) or as [rows, k, c_in] (kc_order 1: ChannelsLast of [rows, c_in, 1, k]).
struct WeightNormTensor {
  const float* v;
  const float* g;
  void* w;
  float* norm;     // [rows], kept for the backward
  void* grad_w;    // backward: dL/dw in T, laid out as w
  float* grad_v;   // backward: [rows, c_in, k]
  float* grad_g;   // backward: [rows]
  int rows, c_in, k, kc_order;
};

constexpr int kWeightNormBatch = 32;  // weights per launch (the launch's parameters stay < 4 KB)

struct WeightNormBatch {
  WeightNormTensor t[kWeightNormBatch];
  int count;
  int max_rows;
};

// T is float, __half or __nv_bfloat16.
template <typename T>
cudaError_t launch_weight_norm_forward(const WeightNormBatch& batch, cudaStream_t stream);

// grad_g = sum(grad_w * v) / ||v||, grad_v = g / ||v|| * (grad_w - v * grad_g / ||v||).
template <typename T>
cudaError_t launch_weight_norm_backward(const WeightNormBatch& batch, cudaStream_t stream);

}  // namespace monoflow::models::kernels
