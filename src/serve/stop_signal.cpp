#include "serve/stop_signal.h"

#include <pthread.h>
#include <signal.h>

#include <utility>

namespace monoflow::serve {
namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

StopOnSignal::StopOnSignal(std::function<void()> stop) : stop_(std::move(stop)) {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  waiter_ = std::thread([this, set] {
    int caught = 0;
    sigwait(&set, &caught);
    if (ending_) return;
    signal_ = caught;
    stop_();
  });
}

StopOnSignal::~StopOnSignal() {
  ending_ = true;
  if (signal_ == 0) pthread_kill(waiter_.native_handle(), SIGTERM);  // taken by its sigwait, not delivered
  waiter_.join();
}

}  // namespace monoflow::serve
