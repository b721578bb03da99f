// The run directory's contract (docs/reliability.md): one trainer at a time, and a new run
// never overwrites an old one by accident.
//   RunDirLock       an advisory lock (flock) on <dir>/train.lock with the holder's pid in it,
//                    held while the trainer lives; the kernel drops it on exit and on a crash
//   holds_run        whether <dir> has a run to lose (a checkpoint, or a non-empty metrics.jsonl)
//   move_run_aside   --force-new: the old run's files into <dir>/previous-<UTC time>/
//   *_advice         what --resume and a fresh start say in each state, naming a way out that
//                    works from there (docs/reliability.md, "One way out of every state")
//   claim_run_directory  the trainer's use of them: lock, then refuse or move an old run
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace monoflow::train {

class RunDirLock {
 public:
  // Takes the lock without waiting; a FileError naming the holder's pid when another
  // process holds it. `dir` must exist.
  explicit RunDirLock(const std::string& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  static constexpr const char* kFileName = "train.lock";

 private:
  int fd_ = -1;
};

// The files that make `dir` a run, relative to it ("checkpoints/ckpt_000000040.pt",
// "metrics.jsonl"); empty when there is nothing to lose.
std::vector<std::string> run_evidence(const std::string& dir);
inline bool holds_run(const std::string& dir) { return !run_evidence(dir).empty(); }

// The pid (as the lock file holds it) of the trainer holding <dir>/train.lock; "" when none
// does or there is no lock file.
std::string lock_holder(const std::string& dir);

// The message, with the way out that works from that state, for --resume when <dir> has no
// checkpoint: a trainer still running there before its first checkpoint gets the lock's
// message; a run that stopped before its first checkpoint (metrics, no checkpoint) --force-new;
// an empty directory "start without --resume".
std::string no_checkpoint_advice(const std::string& dir);

// The message for a fresh start into a directory that holds a run (`evidence`: run_evidence):
// --resume or --force-new when it has a checkpoint, --force-new alone when it has none.
std::string holds_run_advice(const std::string& dir, const std::vector<std::string>& evidence);

// Moves what a trainer writes (checkpoints/, tensorboard/, images/, samples/, metrics.jsonl,
// config.yaml, rank*_final.pt) into a new <dir>/previous-<YYYYmmdd-HHMMSS>[-N]/ and returns
// that folder. Anything else in `dir` (a feature cache, notes, older previous-*) stays.
std::string move_run_aside(const std::string& dir);

// Rank 0 only (the one that writes): one trainer per run directory (the lock, which lives as
// long as the result), and a fresh run (`resume` empty) never overwrites the run `dir` holds
// (docs/reliability.md): with `force_new` the old run moves aside (`tell` says where, even when
// quiet), else a FileError (holds_run_advice) says how to go on.
std::unique_ptr<RunDirLock> claim_run_directory(const std::string& dir, const std::string& resume, bool force_new,
                                                const std::function<void(const std::string&)>& tell);

// Creates `dir` (and its parents) unless it exists; a FileError when it cannot.
void create_run_folder(const std::string& dir);

}  // namespace monoflow::train
