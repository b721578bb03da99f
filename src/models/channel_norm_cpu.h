// LayerNorm over channels on the CPU in float32 (models/modules.h), one pass each way on the
// [B, C, T] layout: ATen's layer_norm normalises the last dimension, so the composite it replaces
// transposed the channels there and made the output contiguous again (a copy each way), and the
// residual sum and the mask were ops of their own; ~2 ms of a ~165-ms aligner step on one core
// (docs/benchmarks.md, "On the CPU"). tests/models/test_encoder_ops.cpp holds it to the
// original's composite.
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cpu {

// Whether channel_layer_norm_cpu takes them: x [B, C, T], gamma and beta [C], residual (x's
// shape) and mask ([B, 1, T], not requiring a gradient) where defined, all float32 CPU tensors.
bool channel_norm_cpu_applies(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                              const torch::Tensor& residual = {}, const torch::Tensor& mask = {});

// mask * norm(x + residual) (each left out where undefined): the mean and biased variance of
// each [item, frame] column over the channels, eps inside the root, then gamma and beta; with
// the gradients of x, residual, gamma and beta. Frames are split into tiles of a fixed width,
// each tile's sums its own and gamma's and beta's gradients added tile by tile in order, so the
// values are the same for any thread count.
torch::Tensor channel_layer_norm_cpu(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                     double eps, const torch::Tensor& residual = {}, const torch::Tensor& mask = {});

}  // namespace monoflow::models::cpu
