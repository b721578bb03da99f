// Hyper-parameters of the Glow-TTS generator. Field names follow the official configs
// (configs/base.json "model" section, plus FlowGenerator's constructor arguments), so the
// trainer can map config.model onto them one to one; defaults are the ljspeech values.
#pragma once

#include <torch/arg.h>

#include <cstdint>

namespace monoflow::models {

struct GlowTTSOptions {
  GlowTTSOptions(int64_t n_vocab, int64_t out_channels) : n_vocab_(n_vocab), out_channels_(out_channels) {}

  TORCH_ARG(int64_t, n_vocab);               // symbols (+1 with add_blank)
  TORCH_ARG(int64_t, out_channels);          // mel channels
  TORCH_ARG(int64_t, hidden_channels) = 192;
  TORCH_ARG(int64_t, filter_channels) = 768;
  TORCH_ARG(int64_t, filter_channels_dp) = 256;
  TORCH_ARG(int64_t, kernel_size) = 3;
  TORCH_ARG(double, p_dropout) = 0.1;
  TORCH_ARG(int64_t, n_blocks_dec) = 12;
  TORCH_ARG(int64_t, n_layers_enc) = 6;
  TORCH_ARG(int64_t, n_heads) = 2;
  TORCH_ARG(double, p_dropout_dec) = 0.05;
  TORCH_ARG(int64_t, dilation_rate) = 1;
  TORCH_ARG(int64_t, kernel_size_dec) = 5;
  TORCH_ARG(int64_t, n_block_layers) = 4;
  TORCH_ARG(int64_t, n_sqz) = 2;
  TORCH_ARG(bool, prenet) = true;
  TORCH_ARG(bool, mean_only) = true;
  TORCH_ARG(int64_t, hidden_channels_enc) = 192;  // 0: hidden_channels (the original's None)
  TORCH_ARG(int64_t, hidden_channels_dec) = 192;  // 0: hidden_channels
  TORCH_ARG(int64_t, window_size) = 4;            // 0: no relative attention (None)
  TORCH_ARG(int64_t, n_split) = 4;
  TORCH_ARG(bool, sigmoid_scale) = false;
  TORCH_ARG(int64_t, block_length) = 0;           // 0: none
  TORCH_ARG(int64_t, n_speakers) = 0;             // > 1: speaker embedding emb_g
  TORCH_ARG(int64_t, gin_channels) = 0;           // speaker embedding size

 public:
  int64_t encoder_channels() const { return hidden_channels_enc_ > 0 ? hidden_channels_enc_ : hidden_channels_; }
  int64_t decoder_channels() const { return hidden_channels_dec_ > 0 ? hidden_channels_dec_ : hidden_channels_; }

  // Throws monoflow::UserError (naming the model.* key) for values the architecture cannot take.
  void validate() const;
};

}  // namespace monoflow::models
