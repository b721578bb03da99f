// How a dense path element of a given dtype is stored: its size and the bit pattern of
// the value 1. Lets the host and GPU path writers fill any supported dtype with plain
// integer stores, without fp16/bf16 headers in the kernels.
#pragma once

#include <cstdint>
#include <string>

#include <torch/types.h>

#include "common/error.h"

namespace monoflow::align {

struct PathFormat {
  int bytes;     // 1, 2, 4 or 8
  uint64_t one;  // bit pattern of 1 in that dtype
};

inline PathFormat path_format(torch::Dtype dtype) {
  switch (dtype) {
    case torch::kFloat32: return {4, 0x3f800000u};
    case torch::kFloat64: return {8, 0x3ff0000000000000ull};
    case torch::kFloat16: return {2, 0x3c00u};
    case torch::kBFloat16: return {2, 0x3f80u};
    case torch::kInt32: return {4, 1};
    case torch::kInt64: return {8, 1};
    case torch::kInt16: return {2, 1};
    case torch::kInt8:
    case torch::kUInt8:
    case torch::kBool: return {1, 1};
    default:
      throw UserError("maximum_path: unsupported path dtype " +
                      std::string(c10::toString(dtype)) +
                      "; use float32/64, float16, bfloat16, int8/16/32/64, uint8 or bool");
  }
}

}  // namespace monoflow::align
