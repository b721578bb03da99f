// Writes checkpoints beside training: the loop hands over a snapshot (checkpoint_snapshot.h)
// and goes on while it is serialised, written atomically and fsynced, and the run's old
// checkpoints pruned, on a thread of its own. One write at a time: handing over the next
// waits for the one before, so at most one snapshot is held in host memory. A write's error
// surfaces on the loop at the next hand-over, poll or wait, as the same FileError. SIGINT and
// SIGTERM are blocked on the writer's thread: they go to the loop, which polls for them.
//
// What a kill costs: the checkpoint being written may be lost with the steps after it, so a
// kill -9 goes back at most two checkpoint intervals (one with synchronous writes). A stop by
// signal or a normal end waits for the write.
#pragma once

#include <functional>
#include <future>
#include <string>

#include "train/checkpoint.h"

namespace monoflow::train {

class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  ~CheckpointWriter();  // waits for the write in flight (its error, if any, is only logged)
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the previous write (rethrowing its error), then writes `contents` to `path` and
  // runs `after` (pruning) on the writer's thread.
  void write(const std::string& path, CheckpointContents contents, std::function<void()> after = nullptr);

  // The path of the write that has finished since the last call, "" when none has (or one is
  // still running); rethrows a failed write's error. Never waits.
  std::string poll();
  // Waits for the write in flight and returns its path as poll() does.
  std::string wait();

 private:
  std::future<void> pending_;
  std::string pending_path_;
};

}  // namespace monoflow::train
