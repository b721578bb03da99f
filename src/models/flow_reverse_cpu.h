// The decoder flows' reverse transforms for CPU inference, each one pass over the activations:
// ActNorm's and the coupling's affine maps and InvConvNear's channel mixing. The composite ops
// (flow_fused.h's references) take 3 to 7 passes each with a temporary per op: at batch 1 and
// 1,800 frames 0.58 ms a flow on one core, against 0.14 here (dev/cpu/flow_reverse_dev;
// docs/benchmarks.md, "Inference", "On the CPU"). Float32, no autograd; the references stay what
// training and the GPU run. tests/models/test_flow_fused.cpp holds them to each other.
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cpu {

// Whether the kernels below take x [B, C, T] and x_mask [B, 1, T]: float32 CPU tensors, no
// gradient being recorded.
bool flow_reverse_applies(const torch::Tensor& x, const torch::Tensor& x_mask);

// (x - bias) * exp(-logs) * x_mask; logs, bias [1, C, 1].
torch::Tensor actnorm_reverse(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                              const torch::Tensor& x_mask);

// InvConvNear's mixing (flow_fused.h's invconv_mix): the C / n groups of n channels of the
// official view, each mixed by weight [n, n], times x_mask.
torch::Tensor invconv_mix(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// The coupling's reverse map: m_and_logs [B, C, T] (the end convolution's output, its bias
// added), x = (x_0, x_1) -> (x_0, (x_1 - m) * exp(-logs) * x_mask).
torch::Tensor coupling_reverse(const torch::Tensor& x, const torch::Tensor& m_and_logs, const torch::Tensor& x_mask);

}  // namespace monoflow::models::cpu
