// The untrained tiny Glow-TTS checkpoint the inference tests synthesise with (synthesis needs
// only its weights and config snapshot).
#pragma once

#include <torch/torch.h>

#include <string>

#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "test_util.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "train/rng_state.h"

namespace monoflow::train {

// An untrained tiny model's checkpoint (synthesis needs only its weights and config snapshot);
// with speakers > 1 a multi-speaker model. Untrained, the decoder's couplings are the identity
// (their last convolutions start at zero), so a speaker shows only through the durations;
// perturbed adds noise to every weight so that it conditions the decoder's frames as well.
inline std::string tiny_checkpoint(const testing::TempDir& dir, int speakers = 0, bool perturbed = false) {
  Config c = testing::tiny_config(dir / "corpus", dir / "run", 1);
  if (speakers > 1) {
    c.data.n_speakers = speakers;
    c.model.gin_channels(8);
  }
  const text::TextProcessor tp(c.text);
  torch::manual_seed(5);
  models::GlowTTS model(model_options(c, static_cast<int64_t>(tp.vocab_size())));
  if (perturbed) {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.05);
  }
  torch::optim::Adam adam(model->parameters());
  CheckpointState s;
  s.step = 7;
  s.scheduler = c.train.scheduler;
  s.config_yaml = to_yaml(c);
  s.rng = capture_rng();
  const std::string path = dir / ((perturbed ? "perturbed_" : "") + std::string(speakers > 1 ? "multi_" : "") +
                                   "ckpt_000000007.pt");
  save_checkpoint(path, *model, adam, s);
  return path;
}

}  // namespace monoflow::train
