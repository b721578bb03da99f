// Helpers for the data tests: a temporary folder and small synthetic LJSpeech-layout corpora.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <future>
#include <thread>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/audio.h"
#include "data/dataset.h"
#include "data/posix_fs.h"

namespace monoflow::data::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/monoflow-data-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    posix::remove_tree(path_);
  }
  std::string operator/(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// f() must throw a FileError naming `file` (unless empty) and `line` (unless -1) whose message
// contains `text`.
inline void expect_file_error(const std::function<void()>& f, const std::string& file, int line,
                              const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected a FileError containing \"" << text << "\"";
  } catch (const monoflow::FileError& e) {
    if (!file.empty()) EXPECT_EQ(e.file(), file);
    if (line >= 0) EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// Runs f() on a thread for at most `seconds` and returns the message of what it threw, "(no
// error)", or "(hung)". open() of a FIFO blocks until a writer comes, so a reader that hangs on
// one of `fifos` is released by opening it for writing and closing it (end of file), and the
// test fails instead of hanging.
inline std::string error_within(const std::function<void()>& f, const std::vector<std::string>& fifos,
                                double seconds = 30) {
  std::promise<std::string> result;
  std::future<std::string> done = result.get_future();
  std::thread worker([&] {
    try {
      f();
      result.set_value("(no error)");
    } catch (const std::exception& e) {
      result.set_value(e.what());
    }
  });
  bool hung = false;
  if (done.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    hung = true;
    while (done.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
      for (const std::string& fifo : fifos) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // succeeds only while a reader waits
        if (fd >= 0) ::close(fd);
      }
    }
  }
  worker.join();
  return hung ? "(hung)" : done.get();
}

// mkfifo `path` (0600); fails the test when it cannot.
// Sets the intra-op thread count while alive (also above the core count: 16 on CI's 2 cores),
// and restores it.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n) : saved_(at::get_num_threads()) { at::set_num_threads(n); }
  ~IntraOpThreads() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

inline void make_fifo(const std::string& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path; }

// A tone of `samples` samples on the int16 grid (exactly representable after a wav round trip).
inline std::vector<float> tone(int64_t samples, double hz, int rate, double amp = 0.3) {
  std::vector<float> x(samples);
  for (int64_t i = 0; i < samples; ++i) {
    x[i] = static_cast<float>(std::nearbyint(amp * std::sin(2 * M_PI * hz * i / rate) * 32768.0) / 32768.0);
  }
  return x;
}

inline void write_text(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

// dir/metadata.csv + dir/wavs/u<i>.wav with lengths samples[i] at 22050 Hz; text "text <i>".
inline void make_synthetic_ljspeech(const std::string& dir, const std::vector<int64_t>& samples) {
  posix::make_dirs(dir + "/wavs");
  std::ofstream meta(std::filesystem::path(dir) / "metadata.csv");
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::string id = "u" + std::to_string(i);
    write_audio(dir + "/wavs/" + id + ".wav", tone(samples[i], 200.0 + 37.0 * i, 22050), 22050);
    meta << id << "|Text " << i << ".|text " << i << "\n";
  }
}

// A stand-in for the text front-end: one id per byte (tests of the data library only).
inline std::vector<int64_t> byte_encoder(const std::string& s) {
  std::vector<int64_t> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

}  // namespace monoflow::data::testing
