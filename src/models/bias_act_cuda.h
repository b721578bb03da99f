// CUDA path of the text encoder's convolution epilogues (models/conv_bias.h: bias_act; compiled
// only with MONOFLOW_HAS_CUDA): the bias, ReLU, dropout and mask as one kernel each way
// (kernels/bias_act.cu), the bias's gradient summed as the backward goes.
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cuda {

// CUDA y [B, C, T], contiguous, float32, float16 or bfloat16; bias float32 [C]; mask undefined or [B, 1, T] of zeros
// and ones (a sequence mask), all on one device.
bool fused_bias_act_applies(const torch::Tensor& y, const torch::Tensor& bias, const torch::Tensor& mask);

// mask * dropout(act(y + bias)), act ReLU when `relu`; dropout with probability p (0: none) from
// the CUDA generator, its mask drawn again in the backward rather than kept.
torch::Tensor bias_act(const torch::Tensor& y, const torch::Tensor& bias, const torch::Tensor& mask, bool relu,
                       double p);

}  // namespace monoflow::models::cuda
