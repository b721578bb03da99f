// Torch-side entry points of the CUDA backends (compiled only with MONOFLOW_HAS_CUDA).
// Arguments are already checked by check_mas_arguments; logp is on a CUDA device.
#pragma once

#include <torch/types.h>

#include "align/mas.h"
#include "align/mas_tuning.h"

namespace monoflow::align {

bool cuda_device_present();

// `cuda`: the Super-MAS scheme, in place on a float32 logp.
MasResult maximum_path_cuda(torch::Tensor logp, const torch::Tensor& text_lengths,
                            const torch::Tensor& mel_lengths, const MasOptions& options);

// `cuda-fast`: decision bits, tiled warp-pipelined forward, run-length backtracking; the
// kernel by shape unless `tuning` forces one (tests and bench_mas).
MasResult maximum_path_cuda_fast(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                                 const torch::Tensor& mel_lengths, const MasOptions& options,
                                 const FastMasTuning& tuning);

}  // namespace monoflow::align
