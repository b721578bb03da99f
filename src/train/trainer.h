// The training loop: config -> datasets, loader, model, Adam + schedule -> steps, with
// logging (progress line, TensorBoard, metrics.jsonl, alignment PNGs), validation,
// checkpoints and exact resume. Run directory layout (run.dir):
//   train.lock             advisory lock of the trainer using it (src/train/run_dir.h)
//   config.yaml            resolved config of the run
//   checkpoints/ckpt_*.pt  newest train.keep_checkpoints kept
//   tensorboard/           event files
//   metrics.jsonl          one JSON object per logged step and per validation
//   images/                align_<step>.png (training batch), val_align_<step>.png,
//                          val_mel_<step>.png (target above generated: two titled plots
//                          with axes, on one colour scale)
//   samples/val_<step>.wav Griffin-Lim rendering of the validation example
#pragma once

#include <cstdint>
#include <string>

#include "train/config/config.h"

namespace monoflow::train {

struct RunOptions {
  std::string resume;          // "": fresh run; "latest": newest checkpoint of run.dir; else a path
  std::string init_from;       // a fresh run whose model starts from this checkpoint's weights (a
                               // monoflow ckpt_*.pt or an official G_*.pth): no DDI, new optimizer, step 0
  bool force_new = false;      // a fresh run into a run.dir that holds one moves the old aside
  std::string config_yaml;     // the resolved config text to snapshot (to_yaml(config))
  double max_minutes = 0;      // > 0: stop (with a checkpoint) after this much wall time
  bool quiet = false;          // no progress line (tests)
};

struct RunSummary {
  int64_t step = 0;              // optimizer updates done in total
  int64_t epoch = 0;
  int64_t skipped = 0;           // non-finite steps skipped in total
  std::string checkpoint;        // the last checkpoint written ("" if none)
  bool interrupted = false;      // stopped by SIGINT/SIGTERM
  int signal = 0;                // which (interrupted; with several ranks, the one a rank got)
  std::string stop_reason;       // "max_steps", "epochs", "time limit", "signal"
  bool main_rank = true;         // rank 0 of a multi-process run, or the only process: it reports
};

// Throws UserError/FileError for what the user can fix (config, data, checkpoints), a
// FileError when another trainer holds run.dir or when a fresh run (no resume, no force_new)
// would overwrite the run it holds, and a UserError when the loss stays non-finite for
// train.max_nonfinite_steps steps in a row.
RunSummary train(const Config& config, const RunOptions& options);

}  // namespace monoflow::train
