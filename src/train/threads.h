// How many threads a process's tensor operators use (LibTorch's intra-op pool, OpenMP on the
// CPU), chosen so that they do not fight the data loader's threads or other processes for the
// cores. LibTorch's default is one per core, and OpenMP threads spin while they wait for each
// other: on 2 cores beside the loader's 2 threads, one busy process (`yes > /dev/null`) made
// 60 quick-start steps take 193 s instead of 5 s (docs/reliability.md, "Threads").
//
//   requested > 0           exactly that many (run.threads)
//   requested 0, OMP_NUM_THREADS or MKL_NUM_THREADS set
//                           the environment's choice, as LibTorch read it
//   requested 0 otherwise   the usable cores (sched_getaffinity) less the loader's workers,
//                           at least 1 and at most kMaxAutoThreads
//
// train, align and synthesize call set_intra_op_threads once, before their first tensor op.
#pragma once

#include <string>

namespace monoflow::train {

constexpr int kMaxAutoThreads = 8;

// The cores this process may run on (its CPU affinity mask), at least 1.
int usable_cores();

// The automatic choice: cores less loader workers, in [1, kMaxAutoThreads].
int auto_intra_op_threads(int cores, int loader_workers);

// Applies the rule above (at::set_num_threads) and returns a description for the start-up
// line, e.g. "1 (2 cores less 2 loader workers)" or "4 (run.threads)".
std::string set_intra_op_threads(int requested, int loader_workers);

}  // namespace monoflow::train
