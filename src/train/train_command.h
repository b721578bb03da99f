// What the `train` tool and monoflow.train (Python) ask for, and the one way it becomes a run:
// the config file with its --set overrides and the flags that stand for config keys, then
// train(). Both callers share it so that a flag means the same and its messages name it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/config/config.h"
#include "train/trainer.h"

namespace monoflow::train {

struct TrainCommand {
  std::string config_path;             // --config
  std::vector<std::string> overrides;  // --set key=value, in order
  std::string resume;                  // "": a fresh run; "latest": the run dir's newest checkpoint; else a path
  bool force_new = false;              // --force-new
  std::string init_from;               // --init-from
  std::string align_backend;           // --align-backend ("": the config's run.align_backend)
  bool compare_align = false;          // --compare-align
  std::string run_dir;                 // --run-dir ("": the config's run.dir)
  int64_t max_steps = -1;              // --max-steps (-1: the config's train.max_steps); else >= 1
  double max_minutes = 0;              // --max-minutes (0: no limit)
  bool quiet = false;                  // no progress line
};

// The resolved config: the file, then the overrides, then the flags (messages about a key a
// flag set name the flag). UserError for a max_steps below 1 or a max_minutes that is negative
// or not finite, as the tool's own checks word them.
Config resolve_train_config(const TrainCommand& command);

// resolve_train_config, then train() with the command's run options (the resolved config's YAML
// as the run's snapshot). Throws what train() throws.
RunSummary run_train_command(const TrainCommand& command);

}  // namespace monoflow::train
