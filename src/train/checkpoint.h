// Training checkpoints: model, optimizer, scheduler, counters, data-loader position, RNG states
// and the resolved config, in one LibTorch archive written atomically (atomic_file.h).
// Files are <dir>/ckpt_<step, 9 digits>.pt; the newest K are kept.
// Loading checks the format tag and every parameter's name and shape before touching the
// model, so a corrupt or incompatible file is refused with a FileError naming it and what to do
// (never "delete it": the file may be the only copy of a run). Official Glow-TTS files are
// recognised and refused here with a pointer to the tools that read them (weights_file.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "train/rng_state.h"

namespace monoflow::train {

struct CheckpointState {
  int64_t step = 0;               // optimizer updates done
  int64_t epoch = 0;              // epoch the next step belongs to
  int64_t nonfinite_total = 0;    // skipped (non-finite) steps so far
  std::string scheduler;          // schedule kind, checked on resume
  std::string loader_position;    // the data loader's saved position, opaque bytes
  std::string config_yaml;        // the resolved config of the run
  std::string run_id;             // which run wrote it (prune_checkpoints); "" in older files
  std::string dataset;            // its data's identity (resume_check.h); "" in older files
  RngState rng;
};

std::string checkpoint_filename(int64_t step);             // "ckpt_000001000.pt"
std::vector<std::string> list_checkpoints(const std::string& dir);  // oldest first, full paths
std::string newest_checkpoint(const std::string& dir);      // "" when there is none

// A new run's id: 16 hex digits from the clock, the pid and a random device.
std::string new_run_id();
// The run id a checkpoint carries, read without loading it (the pickle and one small
// record); "" when it has none (older files) or it cannot be read.
std::string checkpoint_run_id(const std::string& path);
// Keeps the newest `keep` checkpoints of run `run_id` in `dir` and deletes its older ones;
// checkpoints of other runs, without an id or unreadable are never touched (a copied-in or
// abandoned checkpoint is not this run's to delete). Also removes the temp files of dead
// writers. keep <= 0 keeps all.
void prune_checkpoints(const std::string& dir, int keep, const std::string& run_id);

void save_checkpoint(const std::string& path, const torch::nn::Module& model,
                     const torch::optim::Optimizer& optimizer, const CheckpointState& state);

// What a checkpoint file holds, gathered: the model's tensors by name (parameters, then
// buffers, in the model's order), its signature, and the writer of the optimizer's archive.
// save_checkpoint gathers the live tensors; a snapshot (checkpoint_snapshot.h) host copies.
struct CheckpointContents {
  CheckpointState state;
  std::string model_signature;  // "param|buffer NAME SHAPE" a line
  std::vector<std::pair<std::string, torch::Tensor>> parameters, buffers;
  std::function<void(torch::serialize::OutputArchive&)> write_optimizer;
};
CheckpointContents checkpoint_contents(const torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                                       const CheckpointState& state);
// Serialises `contents` and writes it to `path` atomically (atomic_file.h).
void write_checkpoint(const std::string& path, const CheckpointContents& contents);

// A checkpoint whose bytes or structure are damaged (a record failing its CRC, a storage or
// tensor outside its record, entries missing or unreadable, optimizer state that does not fit
// its parameter), as opposed to a sound file that does not fit (another model, format
// version, an official file: plain FileError). --resume falls back past damaged ones only.
class DamagedCheckpoint : public FileError {
 public:
  using FileError::FileError;
};

// Reads the archive and checks it against `model` (names, shapes) before loading anything,
// and the optimizer's state against the parameters (shape, dtype, layout) before it is used.
// optimizer may be null (synthesis). Tensors land on the model's device.
CheckpointState load_checkpoint(const std::string& path, torch::nn::Module& model,
                                torch::optim::Optimizer* optimizer);

// Only the metadata (step, epoch, config snapshot...), for tools that build the model from it.
CheckpointState read_checkpoint_state(const std::string& path);

// The model's tensors by name, in the model's order (parameters, then buffers), on the CPU,
// without building the model (convert_weights --to-official); the metadata into *state.
std::vector<std::pair<std::string, torch::Tensor>> read_checkpoint_weights(const std::string& path,
                                                                           CheckpointState* state = nullptr);

// The epochs that the run of a checkpoint had completed: what the official Glow-TTS writes as
// "iteration" (utils.save_checkpoint(..., epoch, "G_<epoch>.pth") after each epoch), and what
// its train.py reads back on resume: it goes on at epoch iteration + 1, with the learning-rate
// schedule at step iteration x len(train_loader). That is the loader position's epoch, plus
// one when the position's batch index shows that epoch had run to its end (the batches per
// epoch follow from step = epoch x batches + batch when epoch > 0); state.epoch when the
// position cannot be read. convert_weights --to-official --checkpoint writes it.
int64_t completed_epochs(const CheckpointState& state);

// What a file given as a checkpoint holds, by its contents: monoflow's own archive (a LibTorch
// zip; its format tag is checked when it is opened), a Python torch.save file (the official
// Glow-TTS's G_*.pth and ddi_G.pth, or a state_dict; zip or legacy format), or neither.
enum class CheckpointFormat { kMonoflow, kTorchSave, kUnknown };
CheckpointFormat checkpoint_format(const std::string& path);

// A cheap check before long work (train --resume, before the dataset scan): FileError when
// `path` is missing, a directory, or an official (Python torch.save) file, saying what reads
// the latter. Damage inside the archive is found when it is opened.
void check_checkpoint_file(const std::string& path);

}  // namespace monoflow::train
