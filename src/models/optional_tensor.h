// Optional inputs of the model's custom autograd functions, on any device: LibTorch's custom
// functions take no undefined tensor ("tensor does not have a device"), so "none" travels as an
// empty tensor, and the kernels take nullptr for it.
#pragma once

#include <torch/torch.h>

namespace monoflow::models {

inline torch::Tensor or_none(const torch::Tensor& t, const torch::TensorOptions& options) {
  return t.defined() ? t : torch::empty({0}, options);
}
inline bool is_given(const torch::Tensor& t) { return t.defined() && t.numel() > 0; }
// A pointer to the data, or nullptr for none (T the tensor's element type: data_ptr checks it).
template <typename T>
T* data_or_null(const torch::Tensor& t) { return is_given(t) ? t.data_ptr<T>() : nullptr; }

}  // namespace monoflow::models
