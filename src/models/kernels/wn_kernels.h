// Host-callable launchers of the WaveNet (WN) layer's fused elementwise kernels: raw device
// pointers and a cudaStream_t, no torch headers but the RNG state's plain struct, so the .cu files compile quickly
// (wn_fused.cpp holds the torch side: autograd, dtype dispatch, layouts).
//
// Shared layout: a WN activation [B, C, T] is addressed as (outer, C, inner) with the channel
// axis in the middle: outer = B and inner = T for the usual contiguous [B, C, T], outer = B * T
// and inner = 1 for channels-last memory ([B, T, C], what cuDNN's NHWC kernels read without a
// transpose). `span` = C_half * inner: the elements of one half of one outer row.
// Element types: T is float, __half or __nv_bfloat16; arithmetic is in float.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "models/kernels/philox_dropout.h"

namespace monoflow::models::kernels {

// acts = tanh(a) * sigmoid(b), where (a, b) are the two channel halves of
// dropout(in + bias), in [outer, 2 * span], acts [outer, span]; inner as in the layout above.
// The optional bias (float [2 * C_half] or nullptr) and dropout apply to the input first, as
// the official WN adds the in_layer's bias, drops out, then gates: one uniform per input
// element (philox_dropout.h). Where gate_records_keep_bits says so (16-bit T, packed
// operands) and keep_record is not nullptr, forward also writes the dropout mask there: bit
// e % 8 of byte e / 8 for input element e, outer * 2 * span / 8 bytes.
template <typename T>
bool gate_records_keep_bits(int64_t span, int64_t inner, const void* in, const void* acts);
template <typename T>
cudaError_t launch_tanh_sigmoid_gate_forward(const T* in, const float* bias, T* acts, uint8_t* keep_record,
                                             int64_t outer, int64_t span, int64_t inner, PhiloxDropout dropout,
                                             cudaStream_t stream);

// grad_in [outer, 2 * span] (the gradient of `in`, i.e. before bias and dropout) from
// grad_acts [outer, span], recomputing the rest from `in`; the dropout mask from forward's
// keep_record, or drawn again where that is nullptr.
template <typename T>
cudaError_t launch_tanh_sigmoid_gate_backward(const T* in, const float* bias, const T* grad_acts,
                                              const uint8_t* keep_record, T* grad_in, int64_t outer, int64_t span,
                                              int64_t inner, PhiloxDropout dropout, cudaStream_t stream);

// The residual and skip update of WN layers 0..n-2, with res_skip [outer, 2 * span] split into
// (res, skip) channel halves, plus the res_skip layer's bias (float [2 * C_half] or nullptr),
// and x, skip_sum [outer, span] (float):
//   x_out = (x + res + bias_res) * mask,  skip_out = skip_sum + skip + bias_skip,
// and, where x_low is not nullptr, x_low = x_out in R (the next in_layer's input under autocast).
// mask is float, one value per (outer, inner) position: mask[o * inner + i].
template <typename R>
cudaError_t launch_residual_skip_forward(const float* x, const float* skip_sum, const R* res_skip, const float* bias,
                                         const float* mask, float* x_out, float* skip_out, R* x_low, int64_t outer,
                                         int64_t span, int64_t inner, cudaStream_t stream);

// Its backward, with g = grad_x_out + grad_x_low (either may be nullptr: zero):
// grad_x = g * mask, grad_res_skip = [g * mask, grad_skip_out] (the skip sum's own gradient is
// grad_skip_out itself, so it needs no kernel; the bias's is the column sum of grad_res_skip,
// a matrix-vector product on the torch side).
template <typename R>
cudaError_t launch_residual_skip_backward(const float* grad_x_out, const float* grad_skip_out, const R* grad_x_low,
                                          const float* mask, float* grad_x, R* grad_res_skip, int64_t outer,
                                          int64_t span, int64_t inner, cudaStream_t stream);

}  // namespace monoflow::models::kernels
