// Host-callable launchers of the text encoder's convolution epilogues on contiguous [B, C, T]
// tensors of T (float, __half or __nv_bfloat16; the bias, mask and sums in float, the arithmetic
// in float): a convolution's bias, then optionally ReLU, dropout and the sequence mask, as
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
template <typename T>
cudaError_t launch_bias_act_forward(const T* y, const float* bias, const float* mask, T* out, int64_t b, int64_t c,
                                    int64_t t, bool relu, const PhiloxDropout& dropout, cudaStream_t stream);

// grad_y = grad_out * d out / d y, and row_sums [B, C] = grad_y summed over time (the caller sums
// them over the batch: deterministic, no atomics). With `relu`, which elements passed is read from
// `out` (> 0: passed ReLU, dropout and the mask; masks hold 0 or 1; in a 16-bit T a value too
// small to round above 0 counts as not passed); without, dropout's mask is drawn again from its
// state. The row sums add grad_y's values before their rounding to T.
template <typename T>
cudaError_t launch_bias_act_backward(const T* grad_out, const T* out, const float* mask, T* grad_y, float* row_sums,
                                     int64_t b, int64_t c, int64_t t, bool relu, const PhiloxDropout& dropout,
                                     cudaStream_t stream);

}  // namespace monoflow::models::kernels
