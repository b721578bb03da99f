// Torch-side helpers of the model's CUDA kernels (CUDA builds only): launch checks, the kernel
// element type of a tensor's dtype, raw pointers in that type, bias gradients (column sums).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <torch/torch.h>

#include "models/optional_tensor.h"

namespace monoflow::models::cuda {

inline void check_launch(cudaError_t error, const char* what) {
  TORCH_CHECK(error == cudaSuccess, what, ": ", cudaGetErrorString(error));
}

inline bool kernel_dtype(torch::ScalarType s) {
  return s == torch::kFloat || s == torch::kHalf || s == torch::kBFloat16;
}

// Calls f(static_cast<T*>(nullptr)) with T the kernel type of `s` (float, __half, __nv_bfloat16).
template <typename F>
void dispatch_kernel_dtype(torch::ScalarType s, const char* what, F&& f) {
  switch (s) {
    case torch::kFloat: f(static_cast<float*>(nullptr)); break;
    case torch::kHalf: f(static_cast<__half*>(nullptr)); break;
    case torch::kBFloat16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
    default: TORCH_CHECK(false, what, ": unsupported dtype ", s);
  }
}

template <typename T>
T* data_as(const torch::Tensor& t) { return reinterpret_cast<T*>(t.data_ptr()); }

// Optional inputs (or_none, is_given, data_or_null): models/optional_tensor.h.

// Column sums of [N, C] rows (a bias's gradient) in float, by kernels/column_sums.cu: two
// deterministic passes, where cuBLAS's matrix-vector product with ones took a fill, a split-K
// GEMV and its reduction, and rounded to the rows' dtype (column_sums_cuda.cpp).
torch::Tensor column_sums(const torch::Tensor& rows, torch::ScalarType dtype);

// Per-channel sums of a channels-last [B, C, T] tensor: its [B * T, C] rows' column sums.
inline torch::Tensor channel_sums_channels_last(const torch::Tensor& grad, torch::ScalarType dtype) {
  return column_sums(grad.permute({0, 2, 1}).reshape({-1, grad.size(1)}), dtype);
}

}  // namespace monoflow::models::cuda
