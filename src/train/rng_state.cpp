#include "train/rng_state.h"

#include <ATen/Context.h>

#include <algorithm>

namespace monoflow::train {

RngState capture_rng() {
  RngState state;
  {
    auto gen = at::globalContext().defaultGenerator(at::Device(at::kCPU));
    std::lock_guard<std::mutex> lock(gen.mutex());
    state.cpu = gen.get_state();
  }
  if (torch::cuda::is_available()) {
    const auto n = static_cast<int>(torch::cuda::device_count());
    for (int i = 0; i < n; ++i) {
      auto gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, i));
      std::lock_guard<std::mutex> lock(gen.mutex());
      state.cuda.push_back(gen.get_state());
    }
  }
  return state;
}

void restore_rng(const RngState& state) {
  if (state.cpu.defined()) {
    auto gen = at::globalContext().defaultGenerator(at::Device(at::kCPU));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state.cpu);
  }
  if (!state.cuda.empty() && torch::cuda::is_available()) {
    const auto n = std::min<size_t>(state.cuda.size(), torch::cuda::device_count());
    for (size_t i = 0; i < n; ++i) {
      auto gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<int>(i)));
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state.cuda[i]);
    }
  }
}

}  // namespace monoflow::train
