// The decoder flows' elementwise work, fused on CUDA (kernels/flow_fused.cu) and, for CPU
// inference, in one pass each (flow_reverse_cpu.h), with composite references (the official ops,
// what CPU training runs); tests/models/test_flow_fused.cpp holds them to each other.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace monoflow::models {

// ActNorm's forward transform (bias + exp(logs) * x) * x_mask, x [B, C, T], logs/bias
// [1, C, 1], x_mask [B, 1, T]; gradients for x, logs and bias.
torch::Tensor actnorm_affine(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                             const torch::Tensor& x_mask);
torch::Tensor actnorm_affine_reference(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                                       const torch::Tensor& x_mask);

// ActNorm's reverse transform (x - bias) * exp(-logs) * x_mask.
torch::Tensor actnorm_reverse(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                              const torch::Tensor& x_mask);
torch::Tensor actnorm_reverse_reference(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                                        const torch::Tensor& x_mask);

// InvConvNear's channel mixing: x [B, C, T] viewed as C / n groups of n channels (the official
// view/permute), each group mixed by weight [n, n], times x_mask [B, 1, T]. Fused on CUDA for
// n = 4, and in CPU inference for any even n.
torch::Tensor invconv_mix(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);
torch::Tensor invconv_mix_reference(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask);

// The affine coupling's forward transform (official CouplingBlock): out = end(h) without its
// bias [B, C, T], bias [C]; (m, logs) = halves of out + bias; returns
// (cat(x_0, (m + exp(logs) * x_1) * x_mask), sum of logs * x_mask per item).
// Fused when x is float [B, C, T] contiguous and out channels-last (the coupling network's).
std::pair<torch::Tensor, torch::Tensor> coupling_affine(const torch::Tensor& x, const torch::Tensor& out,
                                                        const torch::Tensor& bias, const torch::Tensor& x_mask);
std::pair<torch::Tensor, torch::Tensor> coupling_affine_reference(const torch::Tensor& x, const torch::Tensor& out,
                                                                  const torch::Tensor& bias,
                                                                  const torch::Tensor& x_mask);

// The coupling's reverse transform: m_and_logs = end(h) with its bias [B, C, T]; (m, logs) its
// halves; returns cat(x_0, (x_1 - m) * exp(-logs) * x_mask).
torch::Tensor coupling_reverse(const torch::Tensor& x, const torch::Tensor& m_and_logs, const torch::Tensor& x_mask);
torch::Tensor coupling_reverse_reference(const torch::Tensor& x, const torch::Tensor& m_and_logs,
                                         const torch::Tensor& x_mask);

}  // namespace monoflow::models
