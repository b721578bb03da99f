#include "train/threads.h"

#include <ATen/Parallel.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>

namespace monoflow::train {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

int auto_intra_op_threads(int cores, int loader_workers) {
  return std::clamp(cores - std::max(loader_workers, 0), 1, kMaxAutoThreads);
}

std::string set_intra_op_threads(int requested, int loader_workers) {
  if (requested > 0) {
    at::set_num_threads(requested);
    return std::to_string(requested) + " (run.threads)";
  }
  for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::to_string(at::get_num_threads()) + " (" + name + ")";
  }
  const int cores = usable_cores();
  const int n = auto_intra_op_threads(cores, loader_workers);
  at::set_num_threads(n);
  return std::to_string(n) + " (" + std::to_string(cores) + " cores less " + std::to_string(loader_workers) +
         " loader workers, at most " + std::to_string(kMaxAutoThreads) + ")";
}

}  // namespace monoflow::train
