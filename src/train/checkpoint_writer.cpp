#include "train/checkpoint_writer.h"

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <iostream>

namespace monoflow::train {

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {  // a destructor cannot throw; the run is ending anyway
    std::cerr << "error: " << e.what() << std::endl;
  }
}

void CheckpointWriter::write(const std::string& path, CheckpointContents contents, std::function<void()> after) {
  wait();
  pending_path_ = path;
  // The writer thread starts with SIGINT and SIGTERM blocked (a thread inherits its creator's
  // mask), so that they reach the loop, which polls for them (signals.h), and never interrupt
  // the write's system calls.
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous);
  try {
    pending_ = std::async(std::launch::async, [path, contents = std::move(contents), after = std::move(after)] {
      write_checkpoint(path, contents);
      if (after) after();
    });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

std::string CheckpointWriter::poll() {
  if (!pending_.valid() || pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return "";
  return wait();
}

std::string CheckpointWriter::wait() {
  if (!pending_.valid()) return "";
  std::string path = std::move(pending_path_);
  pending_path_.clear();
  pending_.get();  // rethrows the write's error; leaves pending_ invalid either way
  return path;
}

}  // namespace monoflow::train
