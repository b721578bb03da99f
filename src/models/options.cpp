#include "models/options.h"

#include <string>

#include "common/checks.h"

namespace monoflow::models {

using check::at_least;
using check::positive;
using check::probability;
using check::require;

void GlowTTSOptions::validate() const {
  // One value at a time.
  require(n_vocab_ > 0, "model.n_vocab", "the vocabulary must not be empty");
  require(out_channels_ > 0, "model.out_channels", "needs at least one mel channel (data.n_mel_channels)");
  require("data.n_speakers", at_least<int64_t>(n_speakers_, 0));
  require("model.hidden_channels", positive(hidden_channels_));
  require("model.filter_channels", positive(filter_channels_));
  require("model.filter_channels_dp", positive(filter_channels_dp_));
  require("model.kernel_size", positive(kernel_size_));
  require("model.p_dropout", probability(p_dropout_));
  require("model.n_blocks_dec", positive(n_blocks_dec_));
  require("model.n_layers_enc", at_least<int64_t>(n_layers_enc_, 0));
  require("model.n_heads", positive(n_heads_));
  require("model.p_dropout_dec", probability(p_dropout_dec_));
  require("model.dilation_rate", positive(dilation_rate_));
  require("model.kernel_size_dec", positive(kernel_size_dec_));
  require("model.n_block_layers", positive(n_block_layers_));
  require("model.n_sqz", positive(n_sqz_));
  require("model.hidden_channels_enc", at_least<int64_t>(hidden_channels_enc_, 0));
  require("model.hidden_channels_dec", at_least<int64_t>(hidden_channels_dec_, 0));
  require("model.window_size", at_least<int64_t>(window_size_, 0));
  require("model.n_split", positive(n_split_));
  require("model.block_length", at_least<int64_t>(block_length_, 0));
  require("model.gin_channels", at_least<int64_t>(gin_channels_, 0));
  // Across values.
  const bool own_encoder_width = hidden_channels_enc_ > 0 && hidden_channels_enc_ != hidden_channels_;
  require(encoder_channels() % n_heads_ == 0, "model.n_heads",
          std::string("must divide ") + (own_encoder_width ? "model.hidden_channels_enc" : "model.hidden_channels") +
              " (" + std::to_string(encoder_channels()) + ")");
  require(kernel_size_ % 2 == 1, "model.kernel_size", "must be odd (same-length convolution)");
  require(kernel_size_dec_ % 2 == 1, "model.kernel_size_dec", "must be odd (same-length convolution)");
  require(decoder_channels() % 2 == 0, "model.hidden_channels_dec", "must be even (gated units split it in halves)");
  require(n_split_ % 2 == 0, "model.n_split", "must be even (the 1x1 conv mixes channel halves)");
  require((out_channels_ * n_sqz_) % n_split_ == 0, "model.n_split",
          "must divide data.n_mel_channels * model.n_sqz (" + std::to_string(out_channels_ * n_sqz_) + ")");
  require(!(n_speakers_ > 1 && gin_channels_ == 0), "model.gin_channels",
          "must be > 0 when data.n_speakers > 1 (speaker embedding size)");
  require(!(n_speakers_ <= 1 && gin_channels_ > 0), "model.gin_channels",
          "gin_channels > 0 needs data.n_speakers > 1 (set it to 0 for one speaker)");
}

}  // namespace monoflow::models
