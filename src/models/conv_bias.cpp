#include "models/conv_bias.h"

#include "models/dropout.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/bias_act_cuda.h"
#include "models/weight_grads_aside_cuda.h"
#endif

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

namespace {

thread_local AsideWeights* current_aside = nullptr;

// The convolution without its bias, where it can leave the bias to an epilogue: a GPU, a bias,
// [B, C, T] input and zero padding; undefined otherwise.
torch::Tensor conv1d_without_bias(torch::nn::Conv1dImpl& conv, const torch::Tensor& x) {
  const auto& o = conv.options;
  const auto* padding = std::get_if<torch::ExpandingArray<1>>(&o.padding());
  const bool zero_padded = padding && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode());
  if (!x.is_cuda() || !conv.bias.defined() || x.dim() != 3 || !zero_padded) return {};
#ifdef MONOFLOW_HAS_CUDA
  if (const auto w = AsideWeights::take_weight_for(conv); w.defined() && torch::GradMode::is_enabled()) {
    return cuda::conv_weight_grad_aside(x, w, (*padding)->at(0), o.dilation()->at(0));
  }
#endif
  return torch::conv1d(x, conv.weight, /*bias=*/{}, o.stride(), *padding, o.dilation(), o.groups());
}

}  // namespace

torch::Tensor conv1d_act(torch::nn::Conv1dImpl& conv, const torch::Tensor& x, const torch::Tensor& mask, bool relu,
                         double p, bool training) {
  auto y = conv1d_without_bias(conv, x);
#ifdef MONOFLOW_HAS_CUDA
  if (y.defined() && cuda::fused_bias_act_applies(y, conv.bias, mask)) {
    return cuda::bias_act(y, conv.bias, mask, relu, training ? p : 0.0);
  }
#endif
  auto out = y.defined() ? add_channel_bias(y, conv.bias) : conv.forward(x);
  if (relu) out = torch::relu(out);
  out = models::dropout(out, p, training);
  return mask.defined() ? out * mask : out;
}

torch::Tensor conv1d_forward(torch::nn::Conv1dImpl& conv, const torch::Tensor& x) {
  return conv1d_act(conv, x, /*mask=*/{}, /*relu=*/false, /*p=*/0.0, /*training=*/false);
}

AsideWeights::AsideWeights(torch::nn::Module& module, const torch::Tensor& like) : outer_(current_aside) {
#ifdef MONOFLOW_HAS_CUDA
  if (like.is_cuda() && torch::GradMode::is_enabled() && cuda::weight_grads_aside_in_text_side()) {
    for (const auto& m : module.modules(/*include_self=*/false)) {
      const auto* conv = dynamic_cast<const torch::nn::Conv1dImpl*>(m.get());
      if (!conv || !conv->weight.requires_grad() || conv->options.stride()->at(0) != 1 || conv->options.groups() != 1) {
        continue;
      }
      weights_.emplace(conv, cuda::joined_weight(conv->weight));
    }
  }
#else
  (void)module;
  (void)like;
#endif
  current_aside = this;
}

AsideWeights::~AsideWeights() { current_aside = outer_; }

torch::Tensor AsideWeights::take_weight_for(const torch::nn::Conv1dImpl& conv) {
  for (auto* a = current_aside; a; a = a->outer_) {
    if (const auto i = a->weights_.find(&conv); i != a->weights_.end()) {
      auto w = std::move(i->second);
      a->weights_.erase(i);
      return w;
    }
  }
  return {};
}

}  // namespace monoflow::models
