#include "models/attentions.h"

#include "models/conv_bias.h"
#include "models/dropout.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/rel_attention_cuda.h"
#endif

#include <cmath>

namespace monoflow::models {

namespace F = torch::nn::functional;

MultiHeadAttentionImpl::MultiHeadAttentionImpl(int64_t channels, int64_t out_channels, int64_t n_heads,
                                               int64_t window_size, double p_dropout, int64_t block_length)
    : channels_(channels),
      n_heads_(n_heads),
      k_channels_(channels / n_heads),
      window_size_(window_size),
      block_length_(block_length),
      p_dropout_(p_dropout) {
  TORCH_CHECK(channels % n_heads == 0, "MultiHeadAttention: channels not divisible by n_heads");
  conv_q = register_module("conv_q", torch::nn::Conv1d(torch::nn::Conv1dOptions(channels, channels, 1)));
  conv_k = register_module("conv_k", torch::nn::Conv1d(torch::nn::Conv1dOptions(channels, channels, 1)));
  conv_v = register_module("conv_v", torch::nn::Conv1d(torch::nn::Conv1dOptions(channels, channels, 1)));
  if (window_size > 0) {
    const double rel_stddev = std::pow(static_cast<double>(k_channels_), -0.5);
    // heads share one set of relative embeddings, as in the original (heads_share=True)
    emb_rel_k = register_parameter("emb_rel_k", torch::randn({1, window_size * 2 + 1, k_channels_}) * rel_stddev);
    emb_rel_v = register_parameter("emb_rel_v", torch::randn({1, window_size * 2 + 1, k_channels_}) * rel_stddev);
  }
  conv_o = register_module("conv_o", torch::nn::Conv1d(torch::nn::Conv1dOptions(channels, out_channels, 1)));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(conv_q->weight);
  torch::nn::init::xavier_uniform_(conv_k->weight);
  torch::nn::init::xavier_uniform_(conv_v->weight);
}

torch::Tensor MultiHeadAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& c,
                                              const torch::Tensor& attn_mask, double output_dropout) {
  auto q = conv1d_forward(*conv_q, x);
  auto k = conv1d_forward(*conv_k, c);
  auto v = conv1d_forward(*conv_v, c);
  return conv1d_act(*conv_o, attention(q, k, v, attn_mask), {}, /*relu=*/false, output_dropout, is_training());
}

namespace {
// A [b, h, l, l + n - 1] tensor's band view [b, h, l, n]: element (i, k) at row i, column
// i + k (the row stride one longer than a row), so that column j of the window-padded row is
// relative offset j - i - w of an [l, l] matrix shifted by w.
torch::Tensor band_view(const torch::Tensor& padded, int64_t n) {
  const int64_t b = padded.size(0), h = padded.size(1), l = padded.size(2), width = padded.size(3);
  return padded.as_strided({b, h, l, n}, {h * l * width, l * width, width + 1, 1}, padded.storage_offset());
}
}  // namespace

// The official pads the window's embeddings with zeros to relative offsets -(l - 1)..(l - 1)
// and multiplies whole [l, 2l - 1] matrices, of which only the 2w + 1 diagonals around the main
// one are not zero; here only the band is multiplied and placed (at a text length of 180 and
// w = 4, 9 columns instead of 359 in two products each way).
torch::Tensor MultiHeadAttentionImpl::band_to_absolute(const torch::Tensor& x) {
  const int64_t l = x.size(2), n = x.size(3), w = (n - 1) / 2;
  auto padded = torch::zeros({x.size(0), x.size(1), l, l + n - 1}, x.options());
  band_view(padded, n).copy_(x);
  return padded.slice(3, w, w + l);
}

torch::Tensor MultiHeadAttentionImpl::absolute_to_band(const torch::Tensor& x, int64_t n) {
  const int64_t w = (n - 1) / 2;
  return band_view(F::pad(x, F::PadFuncOptions({w, w})), n);
}

torch::Tensor attention_reference(const torch::Tensor& query, const torch::Tensor& key, const torch::Tensor& value,
                                  const torch::Tensor& emb_k, const torch::Tensor& emb_v, const torch::Tensor& mask,
                                  int64_t block_length, double dropout_p, const torch::Tensor& keep_mask) {
  using MHA = MultiHeadAttentionImpl;
  const int64_t t_s = key.size(2), t_t = query.size(2);
  const double scale = std::sqrt(static_cast<double>(key.size(3)));
  auto scores = torch::matmul(query, key.transpose(-2, -1)) / scale;
  if (emb_k.defined()) {
    TORCH_CHECK(t_s == t_t, "relative attention is only available for self-attention");
    auto rel_logits = torch::matmul(query, emb_k[0].t());  // [b,h,l,2w+1]
    scores = scores + MHA::band_to_absolute(rel_logits) / scale;
  }
  if (mask.defined()) {
    scores = scores.masked_fill(mask == 0, -1e4);
    if (block_length > 0) {
      auto block_mask = torch::ones_like(scores).triu(-block_length).tril(block_length);
      scores = scores * block_mask + -1e4 * (1 - block_mask);
    }
  }
  auto p_attn = torch::softmax(scores, -1);  // [b,h,t_t,t_s]
  p_attn = keep_mask.defined() ? p_attn * keep_mask / (1.0 - dropout_p)
                               : models::dropout(p_attn, dropout_p, dropout_p > 0);
  auto output = torch::matmul(p_attn, value);
  if (emb_v.defined()) output = output + torch::matmul(MHA::absolute_to_band(p_attn, emb_v.size(1)), emb_v[0]);
  return output;
}

torch::Tensor relative_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& emb_k, const torch::Tensor& emb_v, const torch::Tensor& mask,
                                 double dropout_p) {
#ifdef MONOFLOW_HAS_CUDA
  if (cuda::fused_relative_attention_applies(q, k, v, emb_k, emb_v, mask)) {
    return cuda::relative_attention(q, k, v, emb_k, emb_v, mask, dropout_p);
  }
#endif
  return attention_reference(q, k, v, emb_k, emb_v, mask, /*block_length=*/0, dropout_p);
}

torch::Tensor MultiHeadAttentionImpl::attention(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                                                const torch::Tensor& mask) {
  const int64_t b = key.size(0), d = key.size(1), t_s = key.size(2), t_t = query.size(2);
  query = query.view({b, n_heads_, k_channels_, t_t}).transpose(2, 3);
  key = key.view({b, n_heads_, k_channels_, t_s}).transpose(2, 3);
  value = value.view({b, n_heads_, k_channels_, t_s}).transpose(2, 3);
  const double dropout_p = is_training() ? p_dropout_ : 0.0;
  // The relative embeddings in the activations' dtype (text_side_precision.h: cast by the
  // encoder's StepWeights, once for all layers).
  const auto emb_k = emb_rel_k.defined() ? StepWeights::cast_of(emb_rel_k).to(query.scalar_type()) : emb_rel_k;
  const auto emb_v = emb_rel_v.defined() ? StepWeights::cast_of(emb_rel_v).to(query.scalar_type()) : emb_rel_v;
  const auto output = window_size_ > 0 && block_length_ == 0 && mask.defined()
                          ? relative_attention(query, key, value, emb_k, emb_v, mask, dropout_p)
                          : attention_reference(query, key, value, emb_k, emb_v, mask, block_length_, dropout_p);
  return output.transpose(2, 3).contiguous().view({b, d, t_t});  // [b, h*d_k, t_t]
}

// ---------------------------------------------------------------------------------------------
FFNImpl::FFNImpl(int64_t in_channels, int64_t out_channels, int64_t filter_channels, int64_t kernel_size,
                 double p_dropout)
    : p_dropout_(p_dropout) {
  conv_1 = register_module("conv_1", torch::nn::Conv1d(torch::nn::Conv1dOptions(in_channels, filter_channels, kernel_size)
                                                           .padding(kernel_size / 2)));
  conv_2 = register_module("conv_2", torch::nn::Conv1d(torch::nn::Conv1dOptions(filter_channels, out_channels, kernel_size)
                                                           .padding(kernel_size / 2)));
}

torch::Tensor FFNImpl::forward(const torch::Tensor& x, const torch::Tensor& x_mask, double output_dropout) {
  // The official order is conv_1(x * x_mask), relu, dropout, then conv_2(y * x_mask) * x_mask;
  // x comes masked (attentions.h), the hidden mask goes on y itself here, and the masked
  // output's dropout commutes with its mask (0 or 1).
  auto y = conv1d_act(*conv_1, x, x_mask, /*relu=*/true, p_dropout_, is_training());
  return conv1d_act(*conv_2, y, x_mask, /*relu=*/false, output_dropout, is_training());
}

// ---------------------------------------------------------------------------------------------
AttentionEncoderImpl::AttentionEncoderImpl(int64_t hidden_channels, int64_t filter_channels, int64_t n_heads,
                                           int64_t n_layers, int64_t kernel_size, double p_dropout,
                                           int64_t window_size, int64_t block_length)
    : n_layers_(n_layers), p_dropout_(p_dropout) {
  attn_layers = register_module("attn_layers", torch::nn::ModuleList());
  norm_layers_1 = register_module("norm_layers_1", torch::nn::ModuleList());
  ffn_layers = register_module("ffn_layers", torch::nn::ModuleList());
  norm_layers_2 = register_module("norm_layers_2", torch::nn::ModuleList());
  for (int64_t i = 0; i < n_layers; ++i) {
    attn_layers->push_back(
        MultiHeadAttention(hidden_channels, hidden_channels, n_heads, window_size, p_dropout, block_length));
    norm_layers_1->push_back(LayerNorm(hidden_channels));
    ffn_layers->push_back(FFN(hidden_channels, hidden_channels, filter_channels, kernel_size, p_dropout));
    norm_layers_2->push_back(LayerNorm(hidden_channels));
  }
}

std::vector<torch::Tensor> AttentionEncoderImpl::relative_embeddings() const {
  std::vector<torch::Tensor> out;
  for (const auto& layer : *attn_layers) {
    const auto* attn = layer->as<MultiHeadAttention>();
    for (const auto* e : {&attn->emb_rel_k, &attn->emb_rel_v}) {
      if (e->defined()) out.push_back(*e);
    }
  }
  return out;
}

torch::Tensor AttentionEncoderImpl::forward(torch::Tensor x, const torch::Tensor& x_mask) {
  auto attn_mask = x_mask.unsqueeze(2) * x_mask.unsqueeze(-1);  // [B,1,T,T]
  // The official masks x at each layer's start, the FFN's input and the output; here x once and
  // then each norm's output, with its residual sum, in the norm (modules.h): the same values in
  // every unmasked frame (the frames a norm sees are columns of their own). Each sublayer's
  // dropout is in its last convolution's epilogue (conv_bias.h: conv1d_act).
  x = masked(x, x_mask);
  for (int64_t i = 0; i < n_layers_; ++i) {
    auto y = attn_layers[i]->as<MultiHeadAttention>()->forward(x, x, attn_mask, p_dropout_);
    x = norm_layers_1[i]->as<LayerNorm>()->forward(x, y, x_mask);
    y = ffn_layers[i]->as<FFN>()->forward(x, x_mask, p_dropout_);
    x = norm_layers_2[i]->as<LayerNorm>()->forward(x, y, x_mask);
  }
  return x;
}

}  // namespace monoflow::models
