// The flags that synthesize and serve share: the trained model (checkpoint, config and its
// overrides), the vocoder, the device, and how the model speaks (prior noise, speaking rate,
// Griffin-Lim's iterations). Each tool adds its own (text, output, port, seed, limits).
#pragma once

#include <CLI/CLI.hpp>

#include "infer/synthesis.h"

namespace monoflow {

inline void add_synthesis_flags(CLI::App& app, train::SynthesisOptions& o) {
  app.add_option("--checkpoint", o.checkpoint,
                 "checkpoint: runs/<name>/checkpoints/ckpt_*.pt, or an official Glow-TTS G_*.pth (needs --config)")
      ->required();
  app.add_option("--config,-c", o.config,
                 "YAML config of the model and text front-end: required for an official checkpoint; replaces a "
                 "monoflow checkpoint's config snapshot");
  app.add_option("--set", o.overrides,
                 "override a key of that config (or of the checkpoint's snapshot), as train's --set: "
                 "--set data.cmudict_path=data/cmudict/cmudict.dict (repeatable)");
  app.add_option("--vocoder", o.vocoder,
                 "TorchScript vocoder (torch.jit.save of a generator taking [1, n_mels, frames]) instead of Griffin-Lim");
  app.add_option("--device", o.device, "auto, cpu, cuda or cuda:N");
  app.add_option("--noise-scale", o.noise_scale, "prior noise scale");
  app.add_option("--length-scale", o.length_scale, "speaking-rate scale (larger is slower; at most 10)");
  app.add_option("--griffin-lim-iters", o.griffin_lim_iterations, "Griffin-Lim iterations");
}

}  // namespace monoflow
