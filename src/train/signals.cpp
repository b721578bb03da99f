#include "train/signals.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>

#include "train/distributed/distributed.h"

namespace monoflow::train {
namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

void on_signal(int signal) {
  if (g_signal.exchange(signal) != 0) _exit(128 + signal);  // asked twice: stop now
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() { return g_signal.load() != 0; }
int stop_signal() { return g_signal.load(); }
void clear_stop_request() { g_signal.store(0); }
void request_stop(int signal) { g_signal.store(signal); }

int signal_of_any_rank(Distributed& dist) {
  const double got = dist.average(stop_requested() ? 1.0 : 0.0);
  const double sum = dist.average(static_cast<double>(stop_signal()));
  return got > 0 ? static_cast<int>(std::lround(sum / got)) : SIGTERM;
}

}  // namespace monoflow::train
