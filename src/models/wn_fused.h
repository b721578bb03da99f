// The WaveNet (WN) layer's elementwise work, fused on CUDA: the tanh-sigmoid gate and the
// residual/skip update. Each op has a composite reference (plain ATen ops, what runs on the
// CPU and for dtypes or layouts the kernels do not take) and a CUDA path with one kernel per
// direction (kernels/wn_fused.cu); tests/models/test_wn_fused.cpp holds them to each other.
//
// Layouts: [B, C, T] tensors contiguous or channels-last (memory [B, T, C]), and [B, C, 1, T]
// tensors in torch's ChannelsLast format, which is how the coupling network runs on a GPU:
// cuDNN's convolution kernels are NHWC and transpose every NCHW input and gradient (10% of
// the step's GPU time in the profile, docs/history/benchmarks-2026-11.md), while LibTorch keeps a layout
// only for 4-D tensors (conv1d makes 3-D inputs contiguous; dropout's backward and other
// ops allocate 3-D results contiguous). Outputs keep their input's layout.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace monoflow::models {

// The WN layer's gated activation: dropout(x_in + bias) -> tanh(a) * sigmoid(b) for its channel
// halves (a, b): [B, 2H, (1,) T] -> [B, H, (1,) T]. This is the official in_layer bias, dropout
// and commons.fused_add_tanh_sigmoid_multiply in one kernel each way. bias [2H] or undefined;
// dropout applies when training and dropout_p > 0 (on CUDA with its own Philox stream).
torch::Tensor gated_activation(const torch::Tensor& x_in, const torch::Tensor& bias = {}, double dropout_p = 0.0,
                               bool training = false);
torch::Tensor gated_activation_reference(const torch::Tensor& x_in, const torch::Tensor& bias = {},
                                         double dropout_p = 0.0, bool training = false);

// One WN layer's residual and skip update (all layers but the last), res_skip [B, 2H, (1,) T]
// split into (res, skip) with the res_skip layer's bias [2H] (or undefined: already added):
// x = (x + res) * x_mask, skip = skip_sum + skip (skip_sum undefined: zero, a WN's first
// layer, which then fills no zero sum to add to). With with_low, x_low is x in res_skip's
// dtype (else undefined), the next in_layer's input under autocast: on CUDA the update's
// kernel writes it and its backward adds its gradient, where a cast would cost a kernel each
// way and one more to sum the two gradients.
struct ResidualSkipOutput {
  torch::Tensor x, skip, x_low;
};
ResidualSkipOutput residual_skip(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                                 const torch::Tensor& bias, const torch::Tensor& x_mask, bool with_low = false);
std::pair<torch::Tensor, torch::Tensor> residual_skip_reference(const torch::Tensor& x, const torch::Tensor& skip_sum,
                                                                const torch::Tensor& res_skip,
                                                                const torch::Tensor& bias,
                                                                const torch::Tensor& x_mask);

// The masked sum (x + res + bias) * x_mask, res [B, H, (1,) T] in any float dtype (16-bit res
// summed in float), bias [H] or undefined, x like the sum or undefined (zero): a WN's last
// layer adding its output to the skip sum and masking it, and a coupling's start convolution
// masking its rows, each one kernel a way on CUDA (residual_skip's without the skip half) and
// one pass on the CPU in float32 (residual_cpu.h, as residual_skip there). With with_low,
// out_low is out in res's dtype, as residual_skip's x_low; with low_only too, out is left
// undefined (on CUDA not written: a WN's output that only a 16-bit product reads).
struct MaskedSumOutput {
  torch::Tensor out, out_low;
};
MaskedSumOutput masked_sum(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                           const torch::Tensor& x_mask, bool with_low = false, bool low_only = false);
torch::Tensor masked_sum_reference(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                                   const torch::Tensor& x_mask);

// Whether gated_activation and residual_skip run fused kernels for tensors like x (a CUDA build
// and a CUDA tensor); the WN layer then leaves the biases out of its convolutions.
bool wn_fused_applies(const torch::Tensor& x);

// Channels-last [B, C, T]: strides (C * T, 1, C).
bool is_channels_last_1d(const torch::Tensor& t);
torch::Tensor to_channels_last_1d(const torch::Tensor& t);

// The coupling network's input on a GPU: [B, C, T] -> [B, C, 1, T] ChannelsLast (else as is).
torch::Tensor to_time_rows(const torch::Tensor& x);

// A stride-1 convolution over time, weight [C_out, C_in, K]: torch::conv1d for [B, C, T],
// conv2d with a [C_out, C_in, 1, K] view of the weight for [B, C, 1, T] (keeping ChannelsLast),
// and for K = 1 on ChannelsLast rows a matrix product (no layout change, cuBLAS kernels).
// `weight_grad_aside`: for [B, C, 1, T] on a GPU with K > 1 and no bias, the weight's gradient
// on a side stream (weight_grads_aside_cuda.h; the weight must come from its joined_weight).
torch::Tensor conv_over_time(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t padding = 0, int64_t dilation = 1, bool weight_grad_aside = false);

}  // namespace monoflow::models
