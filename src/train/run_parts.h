// What a training run is made of, built from its config before the loop starts: the device
// and the ranks, the text front-end, datasets and loaders, the model, optimizer, schedule and
// step options. The trainer (trainer.cpp) builds one in two phases around claiming the run
// directory (the ranks first: rank 0 claims it; the data scan, which may be long, after).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "align/mas.h"
#include "data/datasets.h"
#include "data/loader.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "train/config/config.h"
#include "train/distributed/distributed.h"
#include "train/distributed/gradient_reducer.h"
#include "train/fused_adam.h"
#include "train/lr_schedule.h"
#include "train/train_step.h"

namespace monoflow::train {

struct RunParts {
  torch::Device device{torch::kCPU};
  std::unique_ptr<Distributed> dist;  // world_size 1: every call is a no-op
  bool main = true;                   // rank 0: the one that writes
  align::Backend backend = align::Backend::kCpu;
  bool bf16 = false;
  std::unique_ptr<text::TextProcessor> text;
  data::Datasets datasets;
  std::string dataset_identity;  // saved in checkpoints, compared on --resume (resume_check.h)
  std::unique_ptr<data::DataLoader> loader, val_loader;  // val_loader: null without a validation set
  models::GlowTTS model{nullptr};
  std::unique_ptr<FusedAdam> optimizer;
  std::unique_ptr<GradientReducer> reducer;  // world_size > 1; declared after model: its hooks go first
  std::unique_ptr<LrSchedule> schedule;
  StepOptions step_options;
};

// Phase 1: the device of this process (one GPU per process: cuda:LOCAL_RANK), the ranks,
// TF32, bf16 and the MAS backend.
void choose_devices(const Config& config, RunParts& parts);
// Phase 2: text front-end, datasets, loaders (every rank draws from the same (seed, epoch)
// batch list and takes batches r, r + W, ...), model, optimizer, schedule, step options.
void build_data_and_model(const Config& config, RunParts& parts);

// What the run is about to do, in one line (device, backend, data, parameters, `threads`: the
// intra-op threads and why (threads.h), ranks).
std::string describe_run(const Config& config, const RunParts& parts, const std::string& dir, bool graphs,
                         const std::string& threads);

}  // namespace monoflow::train
