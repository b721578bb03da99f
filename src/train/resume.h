// Resuming a run: which checkpoint --resume means (falling back past a damaged newest one,
// never going back behind newer ones: docs/reliability.md), the damaged ones set aside, and
// the run's state a checkpoint carries besides the weights, written and read back.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "models/glow_tts.h"
#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/fused_adam.h"
#include "train/resume_check.h"

namespace monoflow::train {

struct ResumeChoice {
  std::string path;  // "": a fresh run
  // Plain --resume: newer checkpoints found damaged, with why (rank 0 moves them aside).
  std::vector<std::pair<std::string, std::string>> damaged;
};

// `resume`: "" (fresh run), "latest" (the newest sound checkpoint of <run_dir>/checkpoints), or a
// path. Checked before the (possibly long) dataset scan; a FileError names the next step.
ResumeChoice choose_resume_checkpoint(const std::string& run_dir, const std::string& resume);

// Rank 0, holding the run directory: each damaged checkpoint of `choice` goes to <name>.damaged
// (never deleted), and `tell` says so (even when quiet).
void set_damaged_aside(const ResumeChoice& choice, const std::function<void(const std::string&)>& tell);

// What resume_from reads back, as of now: everything besides the model and optimizer that an
// exact resume needs (the RNG states are captured here); `dataset`: dataset_identity.
CheckpointState run_state(int64_t step, const data::LoaderPosition& position, int64_t skipped, const Config& config,
                          const std::string& config_yaml, const std::string& run_id, const std::string& dataset);

// A resumed run's state from its checkpoint `path`: model and optimizer loaded, the loader
// placed where the run was, the RNGs restored, the model's DDI off (its ActNorms come from the
// file). `say` gets the notes (a changed scheduler, the config keys that changed, where the
// run resumes); `tell` (said even when quiet) the warnings that the training or validation set
// differs from the checkpoint's (`dataset`: this run's dataset_identity).
struct Resumed {
  int64_t step = 0;
  int64_t skipped = 0;           // non-finite steps so far
  std::string run_id;            // a new one for older files, which carry none
  DatasetChanges data_changes;   // what differs from the checkpoint's data ("": nothing)
};
Resumed resume_from(const std::string& path, const Config& config, const std::string& config_yaml,
                    const std::string& dataset, models::GlowTTSImpl& model, FusedAdam& optimizer,
                    data::DataLoader& loader, const std::function<void(const std::string&)>& say,
                    const std::function<void(const std::string&)>& tell);

std::string encode_position(const data::LoaderPosition& p);  // "<epoch> <batch>"
// FileError(path) when `text` is not what encode_position writes.
data::LoaderPosition decode_position(const std::string& text, const std::string& path);

}  // namespace monoflow::train
