// A small Glow-TTS (every kind of layer, with dropout) on the benchmark's vocabulary, for the
// tests of the graphed paths: seconds on a GPU, every code path of the full model.
#pragma once

#include "models/options.h"

namespace monoflow::train::testing {

inline models::GlowTTSOptions small_model_options() {
  return models::GlowTTSOptions(148, 80)
      .hidden_channels(64)
      .hidden_channels_enc(64)
      .hidden_channels_dec(64)
      .filter_channels(128)
      .filter_channels_dp(64)
      .n_layers_enc(2)
      .n_blocks_dec(3)
      .n_block_layers(2);
}

}  // namespace monoflow::train::testing
