// Training checkpoints: model, optimizer, scheduler, counters, data-loader position, RNG states
// and the resolved config, in one LibTorch archive written atomically (atomic_file.h).
// Files are <dir>/ckpt_<step, 9 digits>.pt; the newest K are kept.
// Loading checks the format tag and every parameter's name and shape before touching the
// model, so a corrupt or incompatible file is refused with a FileError naming it and what to do.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "train/rng_state.h"

namespace monoflow::train {

struct CheckpointState {
  int64_t step = 0;               // optimizer updates done
  int64_t epoch = 0;              // epoch the next step belongs to
  int64_t nonfinite_total = 0;    // skipped (non-finite) steps so far
  std::string scheduler;          // schedule kind, checked on resume
  std::string loader_position;    // the data loader's saved position, opaque bytes
  std::string config_yaml;        // the resolved config of the run
  RngState rng;
};

std::string checkpoint_filename(int64_t step);             // "ckpt_000001000.pt"
std::vector<std::string> list_checkpoints(const std::string& dir);  // oldest first, full paths
std::string newest_checkpoint(const std::string& dir);      // "" when there is none
void prune_checkpoints(const std::string& dir, int keep);   // also removes stale temp files

void save_checkpoint(const std::string& path, const torch::nn::Module& model,
                     const torch::optim::Optimizer& optimizer, const CheckpointState& state);

// Reads the archive and checks it against `model` (names, shapes) before loading anything.
// optimizer may be null (synthesis). Tensors land on the model's device.
CheckpointState load_checkpoint(const std::string& path, torch::nn::Module& model,
                                torch::optim::Optimizer* optimizer);

// Only the metadata (step, epoch, config snapshot...), for tools that build the model from it.
CheckpointState read_checkpoint_state(const std::string& path);

}  // namespace monoflow::train
