// How the CPU kernels that walk [rows, frames] tensors (gate_cpu.cpp, flow_reverse_cpu.cpp) split
// their rows between at::parallel_for tasks.
#pragma once

#include <algorithm>
#include <cstdint>

namespace monoflow::models {

// Rows per task: enough values that a task outweighs its scheduling.
inline int64_t rows_per_task(int64_t frames) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(frames, 1)); }

}  // namespace monoflow::models
