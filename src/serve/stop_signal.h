// SIGINT and SIGTERM stop a server cleanly: the signals are blocked in every thread (construct
// this before any other thread starts, so that they inherit the mask) and one thread of its
// own waits for them and calls `stop`. Destroying it ends that thread.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace monoflow::serve {

class StopOnSignal {
 public:
  explicit StopOnSignal(std::function<void()> stop);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  int signal() const { return signal_; }  // the signal that stopped the server; 0 if none

 private:
  std::function<void()> stop_;
  std::atomic<int> signal_{0};
  std::atomic<bool> ending_{false};
  std::thread waiter_;
};

}  // namespace monoflow::serve
