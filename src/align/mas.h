// Monotonic Alignment Search (MAS): the most likely monotonic alignment between text
// tokens and mel frames, behind one API with selectable backends. Semantics (forward
// recursion, tie rule, neg-infinity stand-in): docs/design.md, "MAS semantics".
#pragma once

#include <string>

#include <torch/types.h>

#include "common/error.h"

namespace monoflow::align {

// A non-finite logp value (inf or nan) inside an item's alignment band: diverged weights or
// overflowed activations rather than bad data. The training step counts it as a non-finite
// step; everywhere else it is a UserError like any other.
class NonFiniteError : public UserError {
 public:
  NonFiniteError(int64_t item, const std::string& message) : UserError(message), item_(item) {}
  int64_t item() const { return item_; }

 private:
  int64_t item_;
};

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
  // CUDA backends: where to leave the error flags instead of reading them back. When defined
  // (int32 [kMasFlagCount] on logp's device) the call never waits for the GPU, so it can be
  // captured in a CUDA graph: it writes this call's flags there (see MasFlag) and the caller
  // checks them later. The cpu backend ignores it and throws as usual.
  torch::Tensor deferred_flags;
};

// The error flags a CUDA backend leaves in MasOptions::deferred_flags: 0 = none, otherwise
// B - b for the first offending item b.
enum MasFlag { kMasFlagBadLengths = 0, kMasFlagNonFinite = 1, kMasFlagTimeout = 2, kMasFlagCount = 3 };

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
