// The dev/cpu harnesses' check: the largest |a - b| over the largest |b| (the reference's range).
#pragma once

#include <torch/torch.h>

#include <algorithm>

inline double relative_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-30);
}
