// How the CPU kernels that walk [rows, frames] tensors (gate_cpu.cpp, flow_reverse_cpu.cpp,
// flow_train_cpu.cpp, residual_cpu.cpp) split their rows between at::parallel_for tasks.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace monoflow::models {

// Rows per task: enough values that a task outweighs its scheduling.
inline int64_t rows_per_task(int64_t frames) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(frames, 1)); }

// Rows of T frames of [B, C, T] tensors: row r is item r / c, channel r % c; `each(r, item)`
// for every row, split between at::parallel_for tasks (a row wholly in one task, so per-row
// work gives the same values for any thread count).
template <typename F>
void for_each_row(int64_t items, int64_t channels, int64_t frames, const F& each) {
  at::parallel_for(0, items * channels, rows_per_task(frames), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) each(r, r / channels);
  });
}

}  // namespace monoflow::models
