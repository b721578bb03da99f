// The decoder flows' reverse transforms for CPU inference, each one pass over the activations:
// ActNorm's and the coupling's affine maps and InvConvNear's channel mixing. The composite ops
// (flow_fused.h's references) take 3 to 7 passes each with a temporary per op: at batch 1 and
// 1,800 frames 0.58 ms a flow on one core, against 0.14 here (dev/cpu/flow_reverse_dev;
// docs/benchmarks.md, "Inference", "On the CPU"). Float32, no autograd; the references stay what
// training and the GPU run. tests/models/test_flow_fused.cpp holds them to each other.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace monoflow::models::cpu {

// Whether x [B, C, T] and x_mask [B, 1, T] are float32 CPU tensors of one batch and length: what
// the CPU flow kernels here and in flow_train_cpu.h take, and residual_cpu.h's WN passes.
bool cpu_float_rows(const torch::Tensor& x, const torch::Tensor& x_mask);

// Whether the kernels below take x and x_mask: cpu_float_rows, no gradient being recorded.
bool flow_reverse_applies(const torch::Tensor& x, const torch::Tensor& x_mask);

// (x - bias) * exp(-logs) * x_mask; logs, bias [1, C, 1].
torch::Tensor actnorm_reverse(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                              const torch::Tensor& x_mask);

// InvConvNear's mixing (flow_fused.h's invconv_mix): the C / n groups of n channels of the
// official view, each mixed by weight [n, n], times x_mask.
torch::Tensor invconv_mix(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// The same kernel without the autograd condition, for the training op (flow_train_cpu.h),
// whose forward and input gradient it computes; x float32 CPU [B, C, T], x_mask [B, 1, T].
torch::Tensor invconv_mix_kernel(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// The official view's rows, as element offsets into one item's [C, T]: for group g and mixing
// index k = a * n/2 + j, channel a * C/2 + g * n/2 + j times T, at [g * n + k]; n even and
// dividing C.
std::vector<int64_t> invconv_rows(int64_t channels, int64_t frames, int64_t n);

// The coupling's reverse map: m_and_logs [B, C, T] (the end convolution's output, its bias
// added), x = (x_0, x_1) -> (x_0, (x_1 - m) * exp(-logs) * x_mask).
torch::Tensor coupling_reverse(const torch::Tensor& x, const torch::Tensor& m_and_logs, const torch::Tensor& x_mask);

}  // namespace monoflow::models::cpu
