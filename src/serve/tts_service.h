// The one worker that synthesizes serve's requests: requests wait in a bounded BatchQueue,
// and the worker takes up to max_batch of them at once and says them as one batch
// (Synthesizer::say_all). Each request is said at noise position 0 in its own speaker, so its
// audio does not depend on the batch it lands in (up to float rounding, synthesis.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "infer/synthesis.h"
#include "serve/batch_queue.h"

namespace monoflow::serve {

struct TtsRequest {
  std::string text;
  int64_t speaker = -1;  // in range for a multi-speaker model (checked before submit), -1 otherwise
};

// status 200 with `result`, or an HTTP error status with its message: 400 (a text with
// nothing to say), 413 (over --max-frames), 500 (anything else), 503 (the server stopped).
struct TtsReply {
  int status = 200;
  std::string error;
  train::SynthesisResult result;
};

struct ServiceStats {
  int64_t queued = 0, served = 0, failed = 0, refused = 0, batches = 0, largest_batch = 0;
};

class TtsService {
 public:
  TtsService(train::Synthesizer& synthesizer, size_t queue, size_t max_batch, std::chrono::milliseconds gather);
  ~TtsService();  // stops the worker after its batch; requests still queued get 503
  TtsService(const TtsService&) = delete;
  TtsService& operator=(const TtsService&) = delete;

  // The reply to come, or nullopt when the queue is full (counted as refused).
  std::optional<std::future<TtsReply>> submit(TtsRequest request);
  ServiceStats stats() const;

 private:
  struct Job {
    TtsRequest request;
    std::promise<TtsReply> reply;
  };
  void work();
  void say(std::vector<Job>& batch);

  train::Synthesizer& synthesizer_;
  const size_t max_batch_;
  const std::chrono::milliseconds gather_;
  BatchQueue<Job> queue_;
  std::atomic<int64_t> served_{0}, failed_{0}, refused_{0}, batches_{0}, largest_batch_{0};
  std::thread worker_;
};

}  // namespace monoflow::serve
