// The run directory's contract (docs/reliability.md): one trainer at a time, and a new run
// never overwrites an old one by accident.
//   RunDirLock       an advisory lock (flock) on <dir>/train.lock with the holder's pid in it,
//                    held while the trainer lives; the kernel drops it on exit and on a crash
//   holds_run        whether <dir> has a run to lose (a checkpoint, or a non-empty metrics.jsonl)
//   move_run_aside   --force-new: the old run's files into <dir>/previous-<UTC time>/
//   claim_run_directory  the trainer's use of the three: lock, then refuse or move an old run
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

// Moves what a trainer writes (checkpoints/, tensorboard/, images/, samples/, metrics.jsonl,
// config.yaml, rank*_final.pt) into a new <dir>/previous-<YYYYmmdd-HHMMSS>[-N]/ and returns
// that folder. Anything else in `dir` (a feature cache, notes, older previous-*) stays.
std::string move_run_aside(const std::string& dir);

// Rank 0 only (the one that writes): takes the lock, and a fresh run (`resume` empty) never
// overwrites the run `dir` holds: with `force_new` the old run moves aside (`tell` says where,
// even when quiet), else a FileError says how to go on. The lock lives as long as the result.
std::unique_ptr<RunDirLock> claim_run_directory(const std::string& dir, const std::string& resume, bool force_new,
                                                const std::function<void(const std::string&)>& tell);

// Creates `dir` (and its parents) unless it exists; a FileError when it cannot.
void create_run_folder(const std::string& dir);

}  // namespace monoflow::train
