// The transformer part of the text encoder, after the official attentions.py: multi-head
// self-attention with relative position representations (shared key/value embeddings over a
// window of +-window_size, as in Shaw et al.), the convolutional FFN and the layer stack.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/modules.h"

namespace monoflow::models {

class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  // window_size 0: no relative positions; block_length 0: no block mask.
  MultiHeadAttentionImpl(int64_t channels, int64_t out_channels, int64_t n_heads, int64_t window_size = 0,
                         double p_dropout = 0.0, int64_t block_length = 0);
  // x, c: [B, channels, T]; attn_mask: [B, 1, T, T] (1 inside). Returns [B, out_channels, T],
  // with dropout of probability output_dropout in training (the encoder's, after the layer: on
  // the GPU in the output convolution's epilogue).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& c, const torch::Tensor& attn_mask = {},
                        double output_dropout = 0.0);
  torch::Tensor emb_rel_k, emb_rel_v;  // [1, 2*window+1, channels/n_heads]

  // The relative-position band maps (exposed for tests), w = (n - 1) / 2 the window:
  // [b,h,l,n] band -> [b,h,l,l] with out[i][j] = x[i][j - i + w] where |j - i| <= w, else 0.
  static torch::Tensor band_to_absolute(const torch::Tensor& x);
  // [b,h,l,l] -> [b,h,l,n] band, out[i][k] = x[i][i + k - w] where that column exists, else 0.
  static torch::Tensor absolute_to_band(const torch::Tensor& x, int64_t n);

 private:
  torch::Tensor attention(torch::Tensor query, torch::Tensor key, torch::Tensor value, const torch::Tensor& mask);
  int64_t channels_, n_heads_, k_channels_, window_size_, block_length_;
  double p_dropout_;
  torch::nn::Conv1d conv_q{nullptr}, conv_k{nullptr}, conv_v{nullptr}, conv_o{nullptr};
};
TORCH_MODULE(MultiHeadAttention);

// The attention of MultiHeadAttention as the official ops compose it: q [b, h, l_q, d], k and v
// [b, h, l_k, d]; emb_k, emb_v [1, 2w+1, d] (relative positions, self-attention only) or
// undefined; mask [b, 1, l_q, l_k] (1 inside) or undefined; block_length 0: no block mask;
// dropout on the attention weights. Returns [b, h, l_q, d]. keep_mask, where given, stands in
// for dropout's random draw (weights * keep_mask / (1 - dropout_p)): tests hand it the mask a
// fused kernel drew.
torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& emb_k, const torch::Tensor& emb_v, const torch::Tensor& mask,
                                  int64_t block_length, double dropout_p, const torch::Tensor& keep_mask = {});

// The same with relative positions, a mask and no block mask, as the Glow-TTS encoder runs it:
// fused on CUDA for float32 (rel_attention_cuda.h), attention_reference otherwise.
torch::Tensor relative_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& emb_k, const torch::Tensor& emb_v, const torch::Tensor& mask,
                                 double dropout_p);

// conv(kernel) -> relu -> dropout -> conv(kernel), masked before the second conv and at the end;
// then dropout of probability output_dropout in training (the encoder's, after the layer: on the
// GPU in the second convolution's epilogue, conv_bias.h). x must come masked (zero where x_mask
// is 0): the official masks it again before the first conv, which the encoder's norms do here.
class FFNImpl : public torch::nn::Module {
 public:
  FFNImpl(int64_t in_channels, int64_t out_channels, int64_t filter_channels, int64_t kernel_size,
          double p_dropout = 0.0);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& x_mask, double output_dropout = 0.0);

 private:
  double p_dropout_;
  torch::nn::Conv1d conv_1{nullptr}, conv_2{nullptr};
};
TORCH_MODULE(FFN);

// n_layers x (x = norm1(x + drop(attn(x))); x = norm2(x + drop(ffn(x)))) with post-norm,
// the official attentions.Encoder.
class AttentionEncoderImpl : public torch::nn::Module {
 public:
  AttentionEncoderImpl(int64_t hidden_channels, int64_t filter_channels, int64_t n_heads, int64_t n_layers,
                       int64_t kernel_size, double p_dropout, int64_t window_size = 0, int64_t block_length = 0);
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& x_mask);
  // The attention layers' relative embeddings (what the text side casts with its convolution
  // weights: conv_bias.h's StepWeights).
  std::vector<torch::Tensor> relative_embeddings() const;

 private:
  int64_t n_layers_;
  double p_dropout_;
  torch::nn::ModuleList attn_layers, norm_layers_1, ffn_layers, norm_layers_2;
};
TORCH_MODULE(AttentionEncoder);

}  // namespace monoflow::models
