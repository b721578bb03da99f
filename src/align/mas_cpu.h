// The `cpu` backend: the original Cython MAS, one utterance per task on LibTorch's
// thread pool. A logp on the GPU is copied to the host and the results back, as the
// original did; those copies are part of what this backend costs.
#pragma once

#include <torch/types.h>

#include "align/mas.h"

namespace monoflow::align {

MasResult maximum_path_cpu(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                           const torch::Tensor& mel_lengths, const MasOptions& options);

}  // namespace monoflow::align
