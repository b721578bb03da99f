#include "train/resume.h"

#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "train/checkpoint.h"
#include "train/rng_state.h"
#include "train/run_dir.h"

namespace monoflow::train {
namespace fs = std::filesystem;

std::string encode_position(const data::LoaderPosition& p) {
  return std::to_string(p.epoch) + " " + std::to_string(p.batch);
}

data::LoaderPosition decode_position(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  data::LoaderPosition p;
  if (!(in >> p.epoch >> p.batch) || p.epoch < 0 || p.batch < 0) {
    throw FileError(path, 0, "the checkpoint's data-loader position is unreadable ('" + text +
                                 "'); resume from another checkpoint");
  }
  return p;
}

// Plain --resume takes the newest sound checkpoint: a damaged newer one (disk or copy damage; a
// killed writer leaves none, writes are atomic) is passed over, kept and reported
// (set_damaged_aside), so that an unattended resume loop does not stop for good at it; what
// is lost is the steps since the checkpoint taken. --resume PATH takes that file or stops.
ResumeChoice choose_resume_checkpoint(const std::string& run_dir, const std::string& resume) {
  ResumeChoice choice;
  if (resume.empty()) return choice;
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  if (resume == "latest") {
    const std::vector<std::string> all = list_checkpoints(dir.string());
    // The way out depends on why there is none: a trainer still before its first checkpoint
    // (the lock's message), a run that stopped before one (--force-new), or no run at all.
    if (all.empty()) throw FileError(run_dir, 0, no_checkpoint_advice(run_dir));
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      try {
        read_checkpoint_state(*it);
        choice.path = *it;
        return choice;
      } catch (const DamagedCheckpoint& e) {
        choice.damaged.emplace_back(*it, e.what());
      }
    }
    throw FileError(dir.string(), 0, "--resume: every checkpoint here is damaged, the newest: " +
                                         choice.damaged.front().second);
  }
  if (!fs::is_regular_file(resume)) {
    throw FileError(resume, 0, "--resume: no such checkpoint file; check the path");
  }
  check_checkpoint_file(resume);  // an official file is named as one before the dataset scan
  // Going back to an older checkpoint while newer ones are here: the run would overwrite them
  // as it reaches their steps, and pruning would rank them above its own. They are the user's
  // to keep or drop, so say which and stop.
  const int64_t step = read_checkpoint_state(resume).step;
  std::string newer;
  for (const auto& other : list_checkpoints(dir.string())) {
    if (std::stoll(fs::path(other).filename().string().substr(5, 9)) > step) newer += (newer.empty() ? "" : ", ") + other;
  }
  if (!newer.empty()) {
    throw FileError(resume, 0, "--resume: this checkpoint is at step " + std::to_string(step) +
                                   ", but the run directory holds newer ones (" + newer +
                                   "), which the resumed run would overwrite; move them out of " + dir.string() +
                                   " to go back to step " + std::to_string(step) +
                                   ", or resume the newest with --resume alone");
  }
  choice.path = resume;
  return choice;
}

// Out of the way of --resume, pruning and the resumed run's own checkpoint of that step; never
// deleted: it may be repairable, or evidence.
void set_damaged_aside(const ResumeChoice& choice, const std::function<void(const std::string&)>& tell) {
  for (const auto& [path, why] : choice.damaged) {
    std::string aside = path + ".damaged";
    for (int n = 2; fs::exists(aside); ++n) aside = path + ".damaged-" + std::to_string(n);
    std::error_code ec;
    fs::rename(path, aside, ec);
    if (ec) {
      throw FileError(path, 0, "damaged (" + why + "), and it cannot be moved aside to " + aside + " (" +
                                   ec.message() + "); move it out of the checkpoints folder, or pass --resume " +
                                   choice.path);
    }
    tell("warning: --resume: " + why + "\nwarning: --resume: kept as " + aside +
         "; resuming from the newest sound checkpoint, " + choice.path);
  }
}

CheckpointState run_state(int64_t step, const data::LoaderPosition& position, int64_t skipped, const Config& config,
                          const std::string& config_yaml, const std::string& run_id, const std::string& dataset) {
  CheckpointState s;
  s.step = step;
  s.epoch = position.epoch;
  s.nonfinite_total = skipped;
  s.scheduler = config.train.scheduler;
  s.loader_position = encode_position(position);
  s.config_yaml = config_yaml;
  s.run_id = run_id;
  s.dataset = dataset;
  s.rng = capture_rng();
  return s;
}

Resumed resume_from(const std::string& path, const Config& c, const std::string& config_yaml,
                    const std::string& dataset, models::GlowTTSImpl& model, FusedAdam& optimizer,
                    data::DataLoader& loader, const std::function<void(const std::string&)>& say,
                    const std::function<void(const std::string&)>& tell) {
  const CheckpointState s = load_checkpoint(path, model, &optimizer);
  if (s.scheduler != c.train.scheduler) {
    say("warning: the checkpoint was trained with train.scheduler " + s.scheduler + ", continuing with " +
        c.train.scheduler);
  }
  Resumed r{s.step, s.nonfinite_total, s.run_id.empty() ? new_run_id() : s.run_id, {}};
  loader.set_position(decode_position(s.loader_position, path));
  restore_rng(s.rng);
  model.set_ddi(false);  // ActNorm parameters come from the checkpoint
  if (!s.config_yaml.empty() && s.config_yaml != config_yaml) {
    std::string keys;
    for (const auto& change : config_changes(s.config_yaml, config_yaml)) keys += (keys.empty() ? "" : ", ") + change;
    say("note: the config differs from the one the checkpoint was trained with in " + keys + " (its snapshot is in " +
        path + "; the run directory's config.yaml is replaced by the current one)");
  }
  r.data_changes = dataset_changes(s.dataset, dataset);
  // Said even when quiet: a run that continues on other data should not look like one run.
  if (!r.data_changes.training.empty()) {
    tell("warning: --resume: the training set differs from the checkpoint's: " + r.data_changes.training +
         "; training goes on with the current one");
  }
  if (!r.data_changes.validation.empty()) {
    tell("warning: --resume: the validation set differs from the checkpoint's: " + r.data_changes.validation +
         "; validation losses from step " + std::to_string(r.step + 1) +
         " on are not comparable with earlier ones (recorded in metrics.jsonl)");
  }
  say("resumed from " + path + " at step " + std::to_string(r.step) + ", epoch " +
      std::to_string(loader.position().epoch + 1));
  return r;
}

}  // namespace monoflow::train
