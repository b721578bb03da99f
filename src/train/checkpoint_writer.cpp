#include "train/checkpoint_writer.h"

#include <chrono>
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
  pending_ = std::async(std::launch::async, [path, contents = std::move(contents), after = std::move(after)] {
    write_checkpoint(path, contents);
    if (after) after();
  });
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
