// Hyper-parameters of the Glow-TTS generator: the record the run configuration holds as its
// model section (train::Config::model), as the official code passes hps.model to
// FlowGenerator(n_vocab, out_channels, n_speakers, **hps.model). Field names and defaults are
// those of the official configs/base.json (plus FlowGenerator's constructor arguments), each
// declared once, here. Plain struct, no LibTorch (MONOFLOW_ARG is TORCH_ARG's twin), so that the
// config can include it; validate() lives in options.cpp (library monoflow_model_options).
#pragma once

#include <cstdint>

#include "common/arg.h"

namespace monoflow::models {

struct GlowTTSOptions {
  GlowTTSOptions() = default;  // the config's model section: n_vocab and out_channels come later
  GlowTTSOptions(int64_t n_vocab, int64_t out_channels) : n_vocab_(n_vocab), out_channels_(out_channels) {}

  // Not in the model section: the text front-end, data.n_mel_channels and data.n_speakers give
  // them (train::model_options).
  MONOFLOW_ARG(int64_t, n_vocab) = 0;        // symbols (+1 with add_blank)
  MONOFLOW_ARG(int64_t, out_channels) = 0;   // mel channels
  MONOFLOW_ARG(int64_t, n_speakers) = 0;     // > 1: speaker embedding emb_g
  // The model section.
  MONOFLOW_ARG(int64_t, hidden_channels) = 192;
  MONOFLOW_ARG(int64_t, filter_channels) = 768;
  MONOFLOW_ARG(int64_t, filter_channels_dp) = 256;
  MONOFLOW_ARG(int64_t, kernel_size) = 3;
  MONOFLOW_ARG(double, p_dropout) = 0.1;
  MONOFLOW_ARG(int64_t, n_blocks_dec) = 12;
  MONOFLOW_ARG(int64_t, n_layers_enc) = 6;
  MONOFLOW_ARG(int64_t, n_heads) = 2;
  MONOFLOW_ARG(double, p_dropout_dec) = 0.05;
  MONOFLOW_ARG(int64_t, dilation_rate) = 1;
  MONOFLOW_ARG(int64_t, kernel_size_dec) = 5;
  MONOFLOW_ARG(int64_t, n_block_layers) = 4;
  MONOFLOW_ARG(int64_t, n_sqz) = 2;
  MONOFLOW_ARG(bool, prenet) = true;
  MONOFLOW_ARG(bool, mean_only) = true;
  MONOFLOW_ARG(int64_t, hidden_channels_enc) = 192;  // 0: hidden_channels (the original's None)
  MONOFLOW_ARG(int64_t, hidden_channels_dec) = 192;  // 0: hidden_channels
  MONOFLOW_ARG(int64_t, window_size) = 4;            // 0: no relative attention (None)
  // ours, with the official FlowGenerator's constructor defaults
  MONOFLOW_ARG(int64_t, n_split) = 4;
  MONOFLOW_ARG(bool, sigmoid_scale) = false;
  MONOFLOW_ARG(int64_t, block_length) = 0;           // 0: none
  MONOFLOW_ARG(int64_t, gin_channels) = 0;           // speaker embedding size when n_speakers > 1

 public:
  int64_t encoder_channels() const { return hidden_channels_enc_ > 0 ? hidden_channels_enc_ : hidden_channels_; }
  int64_t decoder_channels() const { return hidden_channels_dec_ > 0 ? hidden_channels_dec_ : hidden_channels_; }

  // Throws monoflow::OptionError naming the model.* (or data.*) key of a value the architecture
  // cannot take.
  void validate() const;
};

}  // namespace monoflow::models
