#include "models/conv_bias.h"

namespace monoflow::models {

namespace {

class ChannelBias : public torch::autograd::Function<ChannelBias> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y,
                               const torch::Tensor& bias) {
    ctx->saved_data["bias_dtype"] = bias.scalar_type();
    return y + bias.view({1, -1, 1});
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto& grad = grads[0];
    const auto dtype = ctx->saved_data["bias_dtype"].toScalarType();
    auto grad_bias = grad.sum(2, /*keepdim=*/false, torch::kFloat).sum(0).to(dtype);
    return {grad, grad_bias};
  }
};

}  // namespace

torch::Tensor add_channel_bias(const torch::Tensor& y, const torch::Tensor& bias) {
  return ChannelBias::apply(y, bias);
}

torch::Tensor conv1d_forward(torch::nn::Conv1dImpl& conv, const torch::Tensor& x) {
  const auto& o = conv.options;
  const auto* padding = std::get_if<torch::ExpandingArray<1>>(&o.padding());
  const bool zero_padded = padding && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode());
  if (!x.is_cuda() || !conv.bias.defined() || x.dim() != 3 || !zero_padded) return conv.forward(x);
  auto y = torch::conv1d(x, conv.weight, /*bias=*/{}, o.stride(), *padding, o.dilation(), o.groups());
  return add_channel_bias(y, conv.bias);
}

}  // namespace monoflow::models
