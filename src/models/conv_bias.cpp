#include "models/conv_bias.h"

#include "models/dropout.h"
#include "models/modules.h"

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
    return y + bias.to(y.scalar_type()).view({1, -1, 1});
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

thread_local StepWeights* current_step = nullptr;

// The convolution without its bias, where it can leave the bias to an epilogue: a GPU, a bias,
// [B, C, T] input and zero padding; undefined otherwise.
torch::Tensor conv1d_without_bias(torch::nn::Conv1dImpl& conv, const torch::Tensor& x) {
  const auto& o = conv.options;
  const auto* padding = std::get_if<torch::ExpandingArray<1>>(&o.padding());
  const bool zero_padded = padding && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode());
  if (!x.is_cuda() || !conv.bias.defined() || x.dim() != 3 || !zero_padded) return {};
  const auto step = StepWeights::take_weight_for(conv);
#ifdef MONOFLOW_HAS_CUDA
  if (step.joined && torch::GradMode::is_enabled()) {
    return cuda::conv_weight_grad_aside(x, step.weight, (*padding)->at(0), o.dilation()->at(0));
  }
#endif
  const auto weight = step.weight.defined() ? step.weight : conv.weight.to(x.scalar_type());
  return torch::conv1d(x, weight, /*bias=*/{}, o.stride(), *padding, o.dilation(), o.groups());
}

// The parameters as one flat cast and its views: a cat and a cast forward, a cat and a cast
// back (where one cast each was two kernels a parameter). Each part starts 16-byte aligned (zero
// padding between them), as cuDNN's and cuBLAS's vectorised paths want.
std::vector<torch::Tensor> cast_together(const std::vector<torch::Tensor>& params, torch::ScalarType dtype) {
  constexpr int64_t kAlign = 8;  // elements: 16 bytes of a 16-bit dtype
  std::vector<torch::Tensor> flat;
  std::vector<int64_t> sizes;
  for (const auto& p : params) {
    flat.push_back(p.reshape({-1}));
    sizes.push_back(p.numel());
    if (const int64_t pad = (kAlign - p.numel() % kAlign) % kAlign; pad > 0) {
      flat.push_back(torch::zeros({pad}, p.options().requires_grad(false)));
      sizes.push_back(pad);
    }
  }
  const auto parts = torch::cat(flat).to(dtype).split_with_sizes(sizes);
  std::vector<torch::Tensor> out;
  for (size_t i = 0, part = 0; i < params.size(); ++i, ++part) {
    out.push_back(parts[part].view(params[i].sizes()));
    if (params[i].numel() % kAlign != 0) ++part;  // its padding
  }
  return out;
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
  return mask.defined() ? masked(out, mask) : out;
}

torch::Tensor conv1d_forward(torch::nn::Conv1dImpl& conv, const torch::Tensor& x) {
  return conv1d_act(conv, x, /*mask=*/{}, /*relu=*/false, /*p=*/0.0, /*training=*/false);
}

StepWeights::StepWeights(torch::nn::Module& module, const torch::Tensor& like, torch::ScalarType dtype,
                         const std::vector<torch::Tensor>& other_params)
    : outer_(current_step) {
  // This scope becomes the thread's current one at the end, once nothing here can throw any
  // more (a throw skips the destructor, which would leave a dangling current_step).
  if (like.is_cuda()) make_weights(module, dtype, other_params);
  current_step = this;
}

void StepWeights::make_weights(torch::nn::Module& module, torch::ScalarType dtype,
                               const std::vector<torch::Tensor>& other_params) {
  std::vector<const torch::nn::Conv1dImpl*> convs;
  std::vector<torch::Tensor> params;
  for (const auto& m : module.modules(/*include_self=*/false)) {
    if (const auto* conv = dynamic_cast<const torch::nn::Conv1dImpl*>(m.get())) {
      convs.push_back(conv);
      params.push_back(conv->weight);
    }
  }
  const bool cast = !params.empty() && params[0].scalar_type() != dtype;
  if (cast) {
    params.insert(params.end(), other_params.begin(), other_params.end());
    params = cast_together(params, dtype);
    for (size_t i = convs.size(); i < params.size(); ++i) {
      casts_.emplace(other_params[i - convs.size()].unsafeGetTensorImpl(), params[i]);
    }
  }
  for (size_t i = 0; i < convs.size(); ++i) {
    Weight w{cast ? params[i] : torch::Tensor(), false};
#ifdef MONOFLOW_HAS_CUDA
    const auto& o = convs[i]->options;
    if (torch::GradMode::is_enabled() && cuda::weight_grads_aside_in_text_side() && params[i].requires_grad() &&
        o.stride()->at(0) == 1 && o.groups() == 1) {
      w = {cuda::joined_weight(params[i]), true};
    }
#endif
    if (w.weight.defined()) weights_.emplace(convs[i], std::move(w));
  }
}

StepWeights::~StepWeights() { current_step = outer_; }

StepWeights::Weight StepWeights::take_weight_for(const torch::nn::Conv1dImpl& conv) {
  for (auto* s = current_step; s; s = s->outer_) {
    if (const auto i = s->weights_.find(&conv); i != s->weights_.end()) {
      auto w = std::move(i->second);
      s->weights_.erase(i);
      return w;
    }
  }
  return {};
}

torch::Tensor StepWeights::cast_of(const torch::Tensor& param) {
  for (auto* s = current_step; s; s = s->outer_) {
    if (const auto i = s->casts_.find(param.unsafeGetTensorImpl()); i != s->casts_.end()) return i->second;
  }
  return param;
}

}  // namespace monoflow::models
