// InvConvNear's channel mixing in CPU training, as one autograd op: the forward and the input's
// gradient are flow_reverse_cpu.h's mixing kernel (by W, then by W's transpose), one pass each
// over the activations, and the weight's gradient one more pass. The composite reference
// (flow_fused.h's invconv_mix_reference: the official view's permuted copies and a 4-channel
// conv2d) took 1.2 ms a flow at batch 8 and ~91 ms at batch 32 on one core of machine D, where
// oneDNN takes the conv2d (docs/benchmarks.md, "On the CPU"). tests/models/test_flow_fused.cpp
// holds the op to the reference.
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cpu {

// Whether invconv_mix_train takes x [B, C, T], weight [n, n] and x_mask [B, 1, T]: float32 CPU
// tensors while autograd records, n even and dividing C.
bool invconv_train_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// The mixing (C / n groups of n channels of the official view, each mixed by weight, times
// x_mask) with its gradients for x and weight. The weight's gradient sums each item's and
// group's terms in float, then those in a fixed order in double: the same bits for any thread
// count.
torch::Tensor invconv_mix_train(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

}  // namespace monoflow::models::cpu
