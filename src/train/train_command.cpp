#include "train/train_command.h"

#include <cmath>
#include <sstream>

#include "common/error.h"
#include "train/config/config_io.h"

namespace monoflow::train {

Config resolve_train_config(const TrainCommand& c) {
  if (c.max_steps != -1 && c.max_steps < 1) {
    throw UserError("--max-steps: must be a whole number >= 1, got " + std::to_string(c.max_steps));
  }
  if (!std::isfinite(c.max_minutes) || c.max_minutes < 0) {
    std::ostringstream got;
    got << c.max_minutes;  // -1, nan: as typed, not std::to_string's -1.000000
    throw UserError("--max-minutes: must be a number >= 0 (0: no limit), got " + got.str());
  }
  std::vector<FlagOverride> flags;
  if (!c.align_backend.empty()) flags.push_back({"--align-backend", "run.align_backend=" + c.align_backend});
  if (c.compare_align) flags.push_back({"--compare-align", "run.compare_align=true"});
  if (!c.run_dir.empty()) flags.push_back({"--run-dir", "run.dir=" + c.run_dir});
  if (c.max_steps >= 0) flags.push_back({"--max-steps", "train.max_steps=" + std::to_string(c.max_steps)});
  return load_config(c.config_path, c.overrides, flags);
}

RunSummary run_train_command(const TrainCommand& c) {
  const Config config = resolve_train_config(c);
  RunOptions options;
  options.resume = c.resume;
  options.force_new = c.force_new;
  options.init_from = c.init_from;
  options.config_yaml = to_yaml(config);
  options.max_minutes = c.max_minutes;
  options.quiet = c.quiet;
  return train(config, options);
}

}  // namespace monoflow::train
