// Is a tensor read from a file inside its storage? LibTorch's unpickler rebuilds a tensor
// from the (offset, sizes, strides) the file states without checking them against the
// storage, so a bad offset made copy_ read past the buffer (SIGSEGV, or garbage exported).
// Header-only; needs LibTorch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "common/error.h"

namespace monoflow {

// "" when every element of `t` lies inside `storage_bytes` bytes of its storage, else what is
// wrong: negative offset, size or stride, an element size that does not divide the storage,
// or an extent past its end. Overflow-safe.
inline std::string tensor_storage_problem(const at::Tensor& t, uint64_t storage_bytes) {
  const auto item = static_cast<uint64_t>(t.element_size());
  if (item == 0 || storage_bytes % item != 0) {
    return "storage of " + std::to_string(storage_bytes) + " bytes is not a whole number of " +
           std::string(c10::toString(t.scalar_type())) + " elements";
  }
  if (t.storage_offset() < 0) return "negative storage offset " + std::to_string(t.storage_offset());
  uint64_t last = static_cast<uint64_t>(t.storage_offset());  // index of the last element
  bool empty = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) < 0 || t.stride(d) < 0) return "negative size or stride in dimension " + std::to_string(d);
    if (t.size(d) == 0) empty = true;
    uint64_t step = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.size(d) > 0 ? t.size(d) - 1 : 0),
                               static_cast<uint64_t>(t.stride(d)), &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return "its sizes and strides overflow";
    }
  }
  if (empty) return "";
  const uint64_t elements = storage_bytes / item;
  if (last >= elements) {
    return "storage offset " + std::to_string(t.storage_offset()) + " with shape " +
           c10::str(t.sizes()) + " and strides " + c10::str(t.strides()) + " needs " +
           (last == UINT64_MAX ? std::string("more than 2^64") : std::to_string(last + 1)) +
           " elements, but its storage holds " + std::to_string(elements);
  }
  return "";
}

// The same against the tensor's own storage (its size as the file declared it).
inline std::string tensor_storage_problem(const at::Tensor& t) {
  return tensor_storage_problem(t, static_cast<uint64_t>(t.storage().nbytes()));
}

// Throws FileError(file, "tensor '<name>': ...") when `t` is not inside its storage.
inline void check_tensor_in_storage(const at::Tensor& t, const std::string& file, const std::string& name) {
  const std::string problem = tensor_storage_problem(t);
  if (!problem.empty()) throw FileError(file, 0, "corrupt file: tensor '" + name + "': " + problem);
}

}  // namespace monoflow
