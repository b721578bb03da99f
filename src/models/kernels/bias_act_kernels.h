// Host-callable launchers of the text encoder's convolution epilogues on contiguous [B, C, T]
// float32 tensors: a convolution's bias, then optionally ReLU, dropout and the sequence mask, as
// one pass each way, the bias's gradient summed per row on the way back (bias_act.cu says how).
// bias_act_cuda.cpp holds the torch side.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "models/kernels/philox_dropout.h"

namespace monoflow::models::kernels {

// out = mask * dropout(act(y + bias)) with act ReLU when `relu`, else identity; mask [B, T] or
// nullptr (none). Dropout keeps element e of the [B, C, T] tensor when its Philox uniform
// (philox_dropout.h: block e / 4, lane e % 4) is below keep, and scales it by 1 / keep.
cudaError_t launch_bias_act_forward(const float* y, const float* bias, const float* mask, float* out, int64_t b,
                                    int64_t c, int64_t t, bool relu, const PhiloxDropout& dropout,
                                    cudaStream_t stream);

// grad_y = grad_out * d out / d y, and row_sums [B, C] = grad_y summed over time (the caller sums
// them over the batch: deterministic, no atomics). With `relu`, which elements passed is read from
// `out` (> 0: passed ReLU, dropout and the mask; masks hold 0 or 1); without, dropout's mask is
// drawn again from its state.
cudaError_t launch_bias_act_backward(const float* grad_out, const float* out, const float* mask, float* grad_y,
                                     float* row_sums, int64_t b, int64_t c, int64_t t, bool relu,
                                     const PhiloxDropout& dropout, cudaStream_t stream);

}  // namespace monoflow::models::kernels
