// train: the Glow-TTS trainer's command line. Everything it does lives in src/train/.
//   train --config configs/ljspeech.yaml [--set key=value ...] [--resume [PATH] | --force-new]
//         [--init-from CHECKPOINT]
//         [--align-backend cpu|cuda|cuda-fast] [--compare-align] [--run-dir DIR]
//         [--max-steps N] [--max-minutes M] [--dry-run]
// Exit status: 0 finished (max steps, epochs, time limit); 1 a user error; 128 + signal when
// SIGINT/SIGTERM stopped it (after its checkpoint: 130 for Ctrl-C, 143 for SIGTERM).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli_main.h"
#include "train/config/config_io.h"
#include "train/train_command.h"

namespace {

// CLI11's own range messages print the bounds as 17-digit doubles: these say what is meant.
CLI::Validator whole_number_at_least_one() {
  return CLI::Validator(
      [](std::string& text) {
        int64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value) || value < 1) return "must be a whole number >= 1, got " + text;
        return std::string();
      },
      "N>=1");
}

CLI::Validator finite_non_negative() {
  return CLI::Validator(
      [](std::string& text) {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value) || value < 0) {
          return "must be a number >= 0 (0: no limit), got " + text;
        }
        return std::string();
      },
      "M>=0");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a Glow-TTS model (monoflow)."};
  std::string config_path, resume, backend, run_dir, init_from;
  std::vector<std::string> overrides;
  bool compare_align = false, print_config = false, force_new = false;
  int64_t max_steps = -1;
  double max_minutes = 0;
  app.add_option("--config,-c", config_path, "YAML config (configs/ljspeech.yaml, ...)")->required();
  app.add_option("--set", overrides, "override a config key: --set train.batch_size=16 (repeatable)");
  auto* resume_opt = app.add_option("--resume", resume,
                                    "continue from the newest checkpoint of the run directory, or from PATH")
                         ->expected(0, 1);
  app.add_flag("--force-new", force_new,
               "the run directory holds a run: move it into <run dir>/previous-<time>/ and start afresh")
      ->excludes(resume_opt);
  app.add_option("--init-from", init_from,
                 "start a new run from this checkpoint's weights (fine-tuning): a monoflow ckpt_*.pt or an official "
                 "Glow-TTS G_*.pth / ddi_G.pth; new optimizer, step 0, no DDI")
      ->excludes(resume_opt);
  app.add_option("--align-backend", backend, "MAS backend: auto, cpu, cuda or cuda-fast (run.align_backend)");
  app.add_flag("--compare-align", compare_align,
               "run every available MAS backend on each step's log-likelihood, require identical paths, log times");
  app.add_option("--run-dir", run_dir, "run directory (run.dir)");
  app.add_option("--max-steps", max_steps, "stop after this many optimizer steps in total (train.max_steps)")
      ->check(whole_number_at_least_one())
      ->default_str("train.max_steps");
  app.add_option("--max-minutes", max_minutes, "stop after this much wall time, with a checkpoint (0: no limit)")
      ->check(finite_non_negative());
  app.add_flag("--dry-run,--print-config", print_config,
               "load and validate the config (with --set overrides), print the resolved values, exit");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("train").blank_line(), [&] {
    // The flags that stand for config keys go through train_command.h, as monoflow.train's do.
    monoflow::train::TrainCommand command;
    command.config_path = config_path;
    command.overrides = overrides;
    if (resume_opt->count() > 0) command.resume = resume.empty() ? "latest" : resume;
    command.force_new = force_new;
    command.init_from = init_from;
    command.align_backend = backend;
    command.compare_align = compare_align;
    command.run_dir = run_dir;
    command.max_steps = max_steps;
    command.max_minutes = max_minutes;
    if (print_config) {
      std::cout << monoflow::train::to_yaml(monoflow::train::resolve_train_config(command));
      return 0;
    }
    const auto summary = monoflow::train::run_train_command(command);
    // One line per run: the other ranks of a multi-process run end silently.
    if (summary.main_rank) {
      std::fprintf(stderr, "done: %lld steps (%s), last checkpoint %s\n", static_cast<long long>(summary.step),
                   summary.stop_reason.c_str(), summary.checkpoint.empty() ? "(none)" : summary.checkpoint.c_str());
    }
    // Stopped by SIGINT/SIGTERM (with its checkpoint): 128 + the signal, as a shell reports a
    // process the signal ended, so that a scheduler can tell it from a finished run.
    return summary.interrupted ? 128 + summary.signal : 0;
  });
}
