// Test and benchmark only: maximum_path with the cuda-fast kernel forced instead of chosen by
// shape. tests/align and tools/bench_mas include this header; production code (models, train,
// the other tools) does not, and needs nothing here: every choice returns the same path.
// The kernel versions production no longer runs (v1, v2) are in dev/cuda/mas_fast.cu.
#pragma once

#include "align/mas.h"

namespace monoflow::align {

struct FastMasTuning {
  int kernel = 0;         // 0: by shape (v4 where its block fits in shared memory, else v3);
                          // 3: the split kernels (kernels/mas_fast_forward.cu, then the walk);
                          // 4: v4, forward and walk fused (kernels/mas_fast_fused.cu)
  int rows_per_lane = 0;  // K, text rows per GPU lane: 2 (v4 only), 4 or 8 (v3 only); 0 = by shape
};

// maximum_path (mas.h) with `tuning` applied when options.backend is cuda-fast (other backends
// ignore it). A tuning that does not exist or does not fit the shape is a UserError.
MasResult maximum_path(torch::Tensor logp, const torch::Tensor& text_lengths,
                       const torch::Tensor& mel_lengths, const MasOptions& options,
                       const FastMasTuning& tuning);

}  // namespace monoflow::align
