#pragma once

#include <torch/torch.h>

#include <unordered_map>
#include <vector>

namespace monoflow::models {

// y + bias over channels for y [B, C, T]. Its backward sums the bias gradient over time first
// (a contiguous reduction) and then over the batch, where autograd's sum over {0, 2} is one
// strided reduction: ~28 us for an encoder activation on an H100 against a few.
torch::Tensor add_channel_bias(const torch::Tensor& y, const torch::Tensor& bias);

// conv.forward(x): conv1d_act without ReLU, dropout or mask, so on the GPU the bias is added
// after the convolution (bias_act_cuda.h, else add_channel_bias). cuDNN adds a convolution's
// bias in a kernel of its own anyway, so the forward numbers are the same.
torch::Tensor conv1d_forward(torch::nn::Conv1dImpl& conv, const torch::Tensor& x);

// The text side's convolution weights and other float32 parameters (attention's relative
// embeddings) for one forward, while alive: in the side's dtype (text_side_precision.h), cast
// together (one kernel each way for all of them, not one per parameter), and, on a GPU with grad
// mode on, the convolutions' through cuda::joined_weight, so that conv1d_act (on this thread)
// computes their gradients on the side stream (weight_grads_aside_cuda.h). Made at the start of a
// forward, before its first layer, so that autograd runs the joins after the layers' backward.
class StepWeights {
 public:
  StepWeights(torch::nn::Module& module, const torch::Tensor& like, torch::ScalarType dtype,
              const std::vector<torch::Tensor>& other_params = {});
  ~StepWeights();
  StepWeights(const StepWeights&) = delete;
  StepWeights& operator=(const StepWeights&) = delete;

  struct Weight {
    torch::Tensor weight;  // undefined: none for this step (take conv.weight)
    bool joined = false;   // its gradient must be computed aside (cuda::conv_weight_grad_aside)
  };
  // The step's weight for `conv`, handed out once (a joined weight has one consumer: a second use
  // of the convolution takes conv.weight itself, cast to its input's dtype).
  static Weight take_weight_for(const torch::nn::Conv1dImpl& conv);
  // One of `other_params` in the step's dtype, or `param` itself where no StepWeights cast it.
  static torch::Tensor cast_of(const torch::Tensor& param);

 private:
  void make_weights(torch::nn::Module& module, torch::ScalarType dtype, const std::vector<torch::Tensor>& other_params);

  std::unordered_map<const torch::nn::Conv1dImpl*, Weight> weights_;
  std::unordered_map<const c10::TensorImpl*, torch::Tensor> casts_;
  StepWeights* outer_;
};

// A text-side convolution with its epilogue: mask * dropout(act(conv(x))), act ReLU when `relu`,
// dropout with probability p when training, mask [B, 1, T] of zeros and ones or undefined (none).
// On the GPU the bias, ReLU, dropout and mask are one kernel each way (bias_act_cuda.h) after
// the convolution without its bias, in x's dtype; elsewhere the official ops in that order.
torch::Tensor conv1d_act(torch::nn::Conv1dImpl& conv, const torch::Tensor& x, const torch::Tensor& mask, bool relu,
                         double p, bool training);

}  // namespace monoflow::models
