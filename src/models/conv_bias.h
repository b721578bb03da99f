#pragma once

#include <torch/torch.h>

#include <unordered_map>

namespace monoflow::models {

// y + bias over channels for y [B, C, T]. Its backward sums the bias gradient over time first
// (a contiguous reduction) and then over the batch, where autograd's sum over {0, 2} is one
// strided reduction: ~28 us for an encoder activation on an H100 against a few.
torch::Tensor add_channel_bias(const torch::Tensor& y, const torch::Tensor& bias);

// conv.forward(x): conv1d_act without ReLU, dropout or mask, so on the GPU the bias is added
// after the convolution (bias_act_cuda.h, else add_channel_bias). cuDNN adds a convolution's
// bias in a kernel of its own anyway, so the forward numbers are the same.
torch::Tensor conv1d_forward(torch::nn::Conv1dImpl& conv, const torch::Tensor& x);

// While alive, on a GPU with grad mode on, the Conv1d submodules of `module` whose weights want a
// gradient take them through cuda::joined_weight, and conv1d_act (on this thread) computes those
// weight gradients on the side stream (weight_grads_aside_cuda.h). Made at the start of a
// forward, before its first layer, so that autograd runs the joins after the layers' backward.
class AsideWeights {
 public:
  AsideWeights(torch::nn::Module& module, const torch::Tensor& like);
  ~AsideWeights();
  AsideWeights(const AsideWeights&) = delete;
  AsideWeights& operator=(const AsideWeights&) = delete;
  // The joined weight for `conv`, undefined where it has none or handed it out already (a
  // joined weight has one consumer: a second use of the convolution takes conv.weight itself).
  static torch::Tensor take_weight_for(const torch::nn::Conv1dImpl& conv);

 private:
  std::unordered_map<const torch::nn::Conv1dImpl*, torch::Tensor> weights_;
  AsideWeights* outer_;
};

// A text-side convolution with its epilogue: mask * dropout(act(conv(x))), act ReLU when `relu`,
// dropout with probability p when training, mask [B, 1, T] of zeros and ones or undefined (none).
// On the GPU the bias, ReLU, dropout and mask are one kernel each way (bias_act_cuda.h) after
// the convolution without its bias; elsewhere the official ops in that order.
torch::Tensor conv1d_act(torch::nn::Conv1dImpl& conv, const torch::Tensor& x, const torch::Tensor& mask, bool relu,
                         double p, bool training);

}  // namespace monoflow::models
