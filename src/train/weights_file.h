// A model's weights from a checkpoint of either kind, for what starts from weights alone
// (train --init-from, synthesize): monoflow's own ckpt_*.pt, or an official Glow-TTS file
// (Python torch.save: utils.save_checkpoint's G_*.pth, init.py's ddi_G.pth, a bare state_dict;
// zip or legacy format). Official files carry no config: the model comes from the caller's.
#pragma once

#include <cstdint>
#include <string>

#include "models/glow_tts.h"

namespace monoflow::train {

struct LoadedWeights {
  bool official = false;  // an official (Python torch.save) file
  int64_t step = 0;       // the checkpoint's step; an official file's "iteration" (0 when absent)
};

// Checks that `path` is a file of one of those kinds before any long work: FileError naming
// it and what it is otherwise (`flag` names the option that gave it, for the message).
void check_weights_file(const std::string& path, const std::string& flag);

// Loads every parameter into `model` (on its device), strictly: every key, every shape, or a
// FileError naming the file and the keys that do not fit. ActNorms count as initialised.
LoadedWeights load_model_weights(const std::string& path, models::GlowTTSImpl& model);

}  // namespace monoflow::train
