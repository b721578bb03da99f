// Monotonic Alignment Search (MAS): the most likely monotonic alignment between text
// tokens and mel frames, behind one API with selectable backends. Semantics (forward
// recursion, tie rule, neg-infinity stand-in): docs/design.md, "MAS semantics".
#pragma once

#include <string>

#include <torch/types.h>

namespace monoflow::align {

enum class Backend { kCpu, kCuda, kCudaFast };

Backend parse_backend(const std::string& name);  // "cpu" | "cuda" | "cuda-fast"; UserError otherwise
std::string backend_name(Backend backend);
bool backend_available(Backend backend);  // CUDA ones: compiled in and a GPU present

struct MasOptions {
  Backend backend = Backend::kCpu;
  float neg_inf = -1e32f;      // stand-in for log(0); the original Cython used -1e9
  bool keep_input = false;     // false: backends may overwrite logp (`cuda` does, in place)
  bool want_path = true;       // dense [B,T,S] path
  torch::Dtype path_dtype = torch::kFloat32;
  bool want_durations = true;  // [B,T] int32 frames per token (0 on padded tokens)
  int fast_rows_per_lane = 0;  // cuda-fast tuning: text rows per GPU lane, 2 (v4 only), 4 or 8; 0 = by shape
  int fast_variant = 0;        // cuda-fast kernel version: 1-3 (kernels/mas_fast_forward.cu), 4 (fused,
                               // kernels/mas_fast_fused.cu); 0 = fastest measured that applies
};

struct MasResult {
  torch::Tensor path;       // [B,T,S], path_dtype, on logp's device; undefined unless want_path
  torch::Tensor durations;  // [B,T] int32, on logp's device; undefined unless want_durations
};

// logp: [B,T,S] float32/float16/bfloat16 (computed in float32). text_lengths, mel_lengths:
// [B] integer tensors (any device) with 1 <= text_lengths[b] <= mel_lengths[b],
// text_lengths[b] <= T, mel_lengths[b] <= S. Cells outside [0,T_b) x [0,S_b) are ignored;
// the path is 0 there. Errors a caller can cause (shapes, dtypes, lengths, non-finite
// values inside the alignment band, unavailable backend) throw monoflow::UserError.
MasResult maximum_path(torch::Tensor logp, const torch::Tensor& text_lengths,
                       const torch::Tensor& mel_lengths, const MasOptions& options);

}  // namespace monoflow::align
