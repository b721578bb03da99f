// Helpers shared by the trainer tests.
#pragma once

#include <ftw.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "common/error.h"

namespace monoflow::train::testing {

// Removes a directory and everything under it. nftw rather than std::filesystem::remove_all:
// libtorch.so exports its own copy of remove_all, which the dynamic linker may pick and which
// crashes here.
inline void remove_tree(const std::string& path) {
  ::nftw(path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
         FTW_DEPTH | FTW_PHYS);
}

// A fresh directory under the system temp folder, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "monoflow_train_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { remove_tree(path_); }
  std::string operator/(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The base of a test suite whose tests share one checkpoint: Suite::make_checkpoint(dir) writes
// it into a fresh folder once, before the suite's first test, and the folder goes after its
// last. Tests read dir_ and checkpoint_.
template <class Suite>
class SharedCheckpointSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    checkpoint_ = std::make_unique<std::string>(Suite::make_checkpoint(*dir_));
  }
  static void TearDownTestSuite() {
    checkpoint_.reset();
    dir_.reset();
  }
  static inline std::unique_ptr<TempDir> dir_;
  static inline std::unique_ptr<std::string> checkpoint_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The message of the UserError f() throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// Runs a shell command, returns its stdout; exit status in *status.
inline std::string run_command(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *status = ::pclose(pipe);
  return out;
}

// A thread that sends `signal` to process pid() as soon as run_dir's metrics.jsonl has logged
// step 2 (or after 60 s); join it once the run has ended.
inline std::thread signal_at_step_two(const std::string& run_dir, std::function<int()> pid, int signal) {
  return std::thread([run_dir, pid = std::move(pid), signal] {
    for (int i = 0; i < 6000; ++i) {
      if (read_text(run_dir + "/metrics.jsonl").find("\"step\":2,") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int target = pid();
    if (target > 0) ::kill(target, signal);
  });
}

// The pid a shell command wrote to `file` (`echo $! > file`), 0 if none.
inline int pid_in(const std::string& file) { return std::atoi(read_text(file).c_str()); }

// Runs the shell `command`, which starts a trainer in the background and writes its pid to
// pid_file, and sends that process `signal` once run_dir's metrics have logged step 2; returns
// the command's exit status.
inline int run_signalling_at_step_two(const std::string& command, const std::string& run_dir,
                                      const std::string& pid_file, int signal) {
  std::thread killer = signal_at_step_two(run_dir, [pid_file] { return pid_in(pid_file); }, signal);
  int status = 0;
  run_command(command, &status);
  killer.join();
  return status;
}

}  // namespace monoflow::train::testing
