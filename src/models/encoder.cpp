#include "models/encoder.h"

#include "models/conv_bias.h"
#include "models/dropout.h"
#include "models/text_side_precision.h"

#include <cmath>

namespace monoflow::models {

DurationPredictorImpl::DurationPredictorImpl(int64_t in_channels, int64_t filter_channels, int64_t kernel_size,
                                             double p_dropout)
    : p_dropout_(p_dropout) {
  using torch::nn::Conv1dOptions;
  conv_1 = register_module("conv_1", torch::nn::Conv1d(Conv1dOptions(in_channels, filter_channels, kernel_size)
                                                           .padding(kernel_size / 2)));
  norm_1 = register_module("norm_1", LayerNorm(filter_channels));
  conv_2 = register_module("conv_2", torch::nn::Conv1d(Conv1dOptions(filter_channels, filter_channels, kernel_size)
                                                           .padding(kernel_size / 2)));
  norm_2 = register_module("norm_2", LayerNorm(filter_channels));
  proj = register_module("proj", torch::nn::Conv1d(Conv1dOptions(filter_channels, 1, 1)));
}

torch::Tensor DurationPredictorImpl::forward(const torch::Tensor& x_in, const torch::Tensor& x_mask) {
  // The official masks each convolution's input; here the first's and then each norm's output
  // (dropout keeps zeros zero), the same values in every unmasked frame. The convolutions' bias
  // and ReLU are one epilogue (conv_bias.h).
  const bool training = is_training();
  auto x = conv1d_act(*conv_1, masked(x_in, x_mask), /*mask=*/{}, /*relu=*/true, /*p=*/0.0, training);
  x = models::dropout(norm_1->forward(x, {}, x_mask), p_dropout_, training);
  x = conv1d_act(*conv_2, x, /*mask=*/{}, /*relu=*/true, /*p=*/0.0, training);
  x = models::dropout(norm_2->forward(x, {}, x_mask), p_dropout_, training);
  return conv1d_act(*proj, x, x_mask, /*relu=*/false, /*p=*/0.0, training);
}

// ---------------------------------------------------------------------------------------------
TextEncoderImpl::TextEncoderImpl(const GlowTTSOptions& o) : options_(o), hidden_(o.encoder_channels()) {
  using torch::nn::Conv1dOptions;
  emb = register_module("emb", torch::nn::Embedding(o.n_vocab(), hidden_));
  {
    torch::NoGradGuard no_grad;
    emb->weight.normal_(0.0, std::pow(static_cast<double>(hidden_), -0.5));
  }
  if (o.prenet()) {
    pre = register_module("pre", ConvReluNorm(hidden_, hidden_, hidden_, /*kernel_size=*/5, /*n_layers=*/3,
                                              /*p_dropout=*/0.5));
  }
  encoder = register_module("encoder", AttentionEncoder(hidden_, o.filter_channels(), o.n_heads(), o.n_layers_enc(),
                                                        o.kernel_size(), o.p_dropout(), o.window_size(),
                                                        o.block_length()));
  proj_m = register_module("proj_m", torch::nn::Conv1d(Conv1dOptions(hidden_, o.out_channels(), 1)));
  if (!o.mean_only()) {
    proj_s = register_module("proj_s", torch::nn::Conv1d(Conv1dOptions(hidden_, o.out_channels(), 1)));
  }
  proj_w = register_module("proj_w", DurationPredictor(hidden_ + o.gin_channels(), o.filter_channels_dp(),
                                                       o.kernel_size(), o.p_dropout()));
}

EncoderOutput TextEncoderImpl::forward(const torch::Tensor& tokens, const torch::Tensor& x_lengths,
                                       const torch::Tensor& g) {
  // Autocast is off here: the side runs in one dtype of its own, float32 or autocast's
  // (text_side_precision.h), with its parameters cast once for the step, not around each op.
  const auto out_dtype = emb->weight.scalar_type();
  const auto dtype = text_side_dtype(tokens, out_dtype);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  // On a GPU the convolutions' weight gradients run beside the backward chain (conv_bias.h).
  const StepWeights weights(*this, tokens, dtype, encoder->relative_embeddings());
  auto x = (emb->forward(tokens) * std::sqrt(static_cast<double>(hidden_))).to(dtype);  // [B,T,H]
  x = x.transpose(1, -1);                                                               // [B,H,T]
  auto x_mask = sequence_mask(x_lengths.to(x.device()), x.size(2)).unsqueeze(1).to(out_dtype);
  if (pre) x = pre->forward(x, x_mask);
  x = encoder->forward(x, x_mask);

  torch::Tensor x_dp = x.detach();
  if (g.defined()) x_dp = torch::cat({x_dp, g.to(dtype).expand({-1, -1, x.size(-1)})}, 1);

  EncoderOutput out;
  // The projections' bias and mask are one epilogue (conv_bias.h); the outputs in the
  // parameters' dtype (float32 under autocast).
  out.x_m = conv1d_act(*proj_m, x, x_mask, /*relu=*/false, /*p=*/0.0, is_training()).to(out_dtype);
  out.x_logs = proj_s ? conv1d_act(*proj_s, x, x_mask, /*relu=*/false, /*p=*/0.0, is_training()).to(out_dtype)
                      : torch::zeros_like(out.x_m);
  out.logw = proj_w->forward(x_dp, x_mask).to(out_dtype);
  out.x_mask = x_mask;
  return out;
}

}  // namespace monoflow::models
