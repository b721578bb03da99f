// The decoder flows' ops in CPU training, each one autograd op with a pass or two over the
// activations where the composite references (flow_fused.h) take several with a temporary each:
// - InvConvNear's channel mixing: the forward and the input's gradient are flow_reverse_cpu.h's
//   mixing kernel (by W, then by W's transpose), the weight's gradient one more pass. The
//   reference (the official view's permuted copies and a 4-channel conv2d) took 1.2 ms a flow at
//   batch 8 and ~91 ms at batch 32 on one core of machine D, where oneDNN takes the conv2d.
// - The coupling's affine transform.
// - ActNorm's forward map.
// docs/benchmarks.md ("On the CPU") has the figures; tests/models/test_flow_fused.cpp holds each
// op to its reference.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace monoflow::models::cpu {

// Whether invconv_mix_train takes x [B, C, T], weight [n, n] and x_mask [B, 1, T]: float32 CPU
// tensors while autograd records, n even and dividing C.
bool invconv_train_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// The mixing (C / n groups of n channels of the official view, each mixed by weight, times
// x_mask) with its gradients for x and weight. The weight's gradient sums each item's and
// group's terms in float, then those in a fixed order in double: the same bits for any thread
// count.
torch::Tensor invconv_mix_train(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// Whether coupling_affine_train takes x [B, C, T], m_and_logs [B, C, T] and x_mask [B, 1, T]:
// float32 CPU tensors while autograd records, C even.
bool coupling_train_applies(const torch::Tensor& x, const torch::Tensor& m_and_logs, const torch::Tensor& x_mask);

// The coupling's affine transform with m_and_logs = (m, logs), the end convolution's output with
// its bias: z = (x_0, (m + exp(logs) * x_1) * x_mask) and the log-determinant sum of logs *
// x_mask per item, with the gradients of x and m_and_logs. Each row's sum is one thread's, the
// rows' added in order: the same bits for any thread count.
std::pair<torch::Tensor, torch::Tensor> coupling_affine_train(const torch::Tensor& x, const torch::Tensor& m_and_logs,
                                                              const torch::Tensor& x_mask);

// Whether actnorm_affine_train takes x [B, C, T], logs and bias [1, C, 1] and x_mask [B, 1, T]:
// float32 CPU tensors while autograd records.
bool actnorm_train_applies(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                           const torch::Tensor& x_mask);

// ActNorm's (bias + exp(logs) * x) * x_mask with the gradients of x, logs and bias: the values
// the reference's ops give, to the bit; logs' and bias's gradients summed row by row in a fixed
// order, the same bits for any thread count.
torch::Tensor actnorm_affine_train(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                                   const torch::Tensor& x_mask);

}  // namespace monoflow::models::cpu
