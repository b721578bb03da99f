// SerialTorchOps: while alive, torch ops on this thread run without intra-op threads.
// The loader and preprocess parallelise over utterances/batches; intra-op OpenMP teams on top
// of that oversubscribe the cores (on a busy 2-core machine, spinning OpenMP teams made batch
// building 10-15x slower). OpenMP's thread count is a per-thread setting, restored on exit, so
// other threads (the trainer's) keep theirs.
#pragma once

#include <ATen/Parallel.h>

// LibTorch's OpenMP runtime (loaded with libtorch_cpu); weak, so a build without OpenMP links.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
extern "C" int omp_get_max_threads() __attribute__((weak));

namespace monoflow::data {

class SerialTorchOps {
 public:
  SerialTorchOps() {
    if (!omp_set_num_threads || !omp_get_max_threads) return;
    at::get_num_threads();  // LibTorch's lazy per-thread init first, or it would undo ours
    saved_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
  ~SerialTorchOps() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  SerialTorchOps(const SerialTorchOps&) = delete;
  SerialTorchOps& operator=(const SerialTorchOps&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace monoflow::data
