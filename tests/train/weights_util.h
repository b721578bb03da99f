// Models of a test config and weight comparisons, shared by the trainer tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/config/options_map.h"

namespace monoflow::train::testing {

// A freshly initialised model of the config (the current torch seed decides its weights).
inline models::GlowTTS tiny_model(const Config& c) {
  const text::TextProcessor tp(c.text);
  return models::GlowTTS(model_options(c, static_cast<int64_t>(tp.vocab_size())));
}

inline models::GlowTTS load_weights(const Config& c, const std::string& checkpoint) {
  models::GlowTTS m = tiny_model(c);
  load_checkpoint(checkpoint, *m, nullptr);
  return m;
}

// Every parameter equal, bit for bit (a fatal failure names the first that is not).
inline void expect_same_weights(models::GlowTTS& a, models::GlowTTS& b) {
  const auto pb = b->named_parameters();
  int64_t compared = 0;
  for (const auto& p : a->named_parameters()) {
    ASSERT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

}  // namespace monoflow::train::testing
