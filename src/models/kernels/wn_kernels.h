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

// The bias's gradient summed by the backward kernels as they write the gradient (channels-last
// rows, inner == 1, packed operands; the *_sums_bias predicates say where): each block of
// kBiasSumRows rows writes one partial row of column sums, in float, before the gradient is
// rounded to its dtype, and column_sums_kernels.h's second pass adds those rows in order into
// grad_bias. bias_partials: float [bias_sum_blocks(outer), 2 * span] (may be nullptr where that
// is one block). The order of the additions depends on the shape only: the same bits every run.
inline constexpr int64_t kBiasSumRows = 16;
inline int64_t bias_sum_blocks(int64_t outer) { return (outer + kBiasSumRows - 1) / kBiasSumRows; }

// grad_in [outer, 2 * span] (the gradient of `in`, i.e. before bias and dropout) from
// grad_acts [outer, span], recomputing the rest from `in`; the dropout mask from forward's
// keep_record, or drawn again where that is nullptr. With grad_bias (float [2 * span], where
// gate_backward_sums_bias holds; else nullptr) also the bias's gradient, grad_in's column sums.
template <typename T>
bool gate_backward_sums_bias(int64_t outer, int64_t span, int64_t inner, const void* in, const void* grad_acts,
                             const void* grad_in);
template <typename T>
cudaError_t launch_tanh_sigmoid_gate_backward(const T* in, const float* bias, const T* grad_acts,
                                              const uint8_t* keep_record, T* grad_in, float* bias_partials,
                                              float* grad_bias, int64_t outer, int64_t span, int64_t inner,
                                              PhiloxDropout dropout, cudaStream_t stream);

// The residual and skip update of WN layers 0..n-2, with res_skip [outer, 2 * span] split into
// (res, skip) channel halves, plus the res_skip layer's bias (float [2 * C_half] or nullptr),
// and x, skip_sum [outer, span] (float):
//   x_out = (x + res + bias_res) * mask,  skip_out = skip_sum + skip + bias_skip,
// and, where x_low is not nullptr, x_low = x_out in R (the next in_layer's input under autocast).
// mask is float, one value per (outer, inner) position: mask[o * inner + i].
// skip_sum may be nullptr: zero (a WN's first layer, whose skip sum starts there).
// The masked sum alone, x_out = (x + res + bias) * mask, where skip_out is nullptr: res_skip is
// then [outer, span] (the res half only), bias [C_half], and skip_sum is not read (a WN's last
// layer adds its output so into the skip sum; a coupling's start conv masks its rows). x may
// be nullptr: zero; x_out may be nullptr where x_low is not: only the low copy is written.
template <typename R>
cudaError_t launch_residual_skip_forward(const float* x, const float* skip_sum, const R* res_skip, const float* bias,
                                         const float* mask, float* x_out, float* skip_out, R* x_low, int64_t outer,
                                         int64_t span, int64_t inner, cudaStream_t stream);

// Its backward, with g = grad_x_out + grad_x_low (either may be nullptr: zero):
// grad_x = g * mask, grad_res_skip = [g * mask, grad_skip_out] (the skip sum's own gradient is
// grad_skip_out itself, so it needs no kernel). For the masked sum alone grad_skip_out is
// nullptr and grad_res_skip [outer, span] gets g * mask; grad_x may be nullptr (no x). The bias
// sums keep their 2 * span columns, the second half zero there. With grad_bias (float [2 * span], where
// residual_skip_backward_sums_bias holds; else nullptr) also the bias's gradient, the column
// sums of grad_res_skip (kBiasSumRows above); otherwise the torch side sums it.
template <typename R>
bool residual_skip_backward_sums_bias(int64_t outer, int64_t span, int64_t inner, const float* grad_x_out,
                                      const float* grad_skip_out, const R* grad_x_low, const float* grad_x,
                                      const R* grad_res_skip);
template <typename R>
cudaError_t launch_residual_skip_backward(const float* grad_x_out, const float* grad_skip_out, const R* grad_x_low,
                                          const float* mask, float* grad_x, R* grad_res_skip, float* bias_partials,
                                          float* grad_bias, int64_t outer, int64_t span, int64_t inner,
                                          cudaStream_t stream);

}  // namespace monoflow::models::kernels
