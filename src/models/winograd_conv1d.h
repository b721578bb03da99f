// A fast 1-D convolution for the decoder's WaveNet in_layers in CPU inference (kernel 5,
// dilation 1, "same" padding): the Toom-Cook/Winograd algorithm F(4, 5). Each tile of 4
// outputs needs 8 input values; the input and the weight go to 8 evaluation points
// (0, ±1, ±2, ±1/2, ∞), the product there is a batch of 8 matrix products [C_out, C_in] x
// [C_in, tiles], and the 4 outputs come back by interpolation. 8 multiplications per 4 outputs
// instead of 20: the in_layers are ~32 of the ~38 GFLOP of a 1,800-frame call, and 2.5x fewer
// of them is what lets 2 cores beat oneDNN's direct convolution by more than its efficiency.
//
// No autograd: used where grad mode is off (synthesis), on the CPU, for float32 (see
// winograd_applies); everything else runs torch's convolution. The transforms add rounding:
// tests/models/test_winograd_conv1d.cpp holds the result to torch::conv1d (tolerance there).
// MONOFLOW_CPU_WINOGRAD=0 in the environment, or set_cpu_winograd(false), turns it off.
#pragma once

#include <torch/torch.h>

namespace monoflow::models {

// Whether the fast path is on (default on; MONOFLOW_CPU_WINOGRAD=0 turns it off at start-up).
bool cpu_winograd_enabled();
void set_cpu_winograd(bool enabled);
// Tests and the harness: the portable loops instead of the AVX2 ones (which run where the CPU
// has AVX2 and FMA).
void set_cpu_winograd_simd(bool enabled);
// Tests and the harness: the AVX2 GEMM blocks where the CPU has AVX-512F too (by default the
// 16-lane blocks run there; MONOFLOW_CPU_AVX512=0 in the environment turns them off at start-up,
// for timing both on one machine). Both give the same bits.
void set_cpu_winograd_avx512(bool enabled);
// Whether the 16-lane blocks run: the CPU has AVX-512F and neither switch turned them off.
bool cpu_winograd_avx512_active();

// Whether winograd_conv1d may stand in for conv1d(x, weight, bias, 1, padding, dilation):
// enabled, grad mode off, CPU float32 [B, C_in, T] x and [C_out, C_in, 5] weight with C_out a
// multiple of 6 (the GEMM's row block), dilation 1, padding 2.
bool winograd_applies(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding, int64_t dilation);

// The weight at the 8 points, packed for the GEMM: [8, C_out / 6, C_in, 6] float32 (computed in
// float64), once per weight.
torch::Tensor winograd_weight(const torch::Tensor& weight);

// conv1d(x, weight, bias, stride 1, padding 2): x [B, C_in, T] float32, u = winograd_weight(weight),
// bias [C_out] or undefined. Returns [B, C_out, T] contiguous.
torch::Tensor winograd_conv1d(const torch::Tensor& x, const torch::Tensor& u, const torch::Tensor& bias);

// The WN layer's gated unit on the same convolution: with y = conv + bias split into halves
// (a, b) over channels, tanh(a) * sigmoid(b), [B, C_out / 2, T] (gated_activation_reference of
// the convolution, in one pass over its output).
torch::Tensor winograd_conv1d_gated(const torch::Tensor& x, const torch::Tensor& u, const torch::Tensor& bias);

// A 1x1 convolution's weight [R, C] or [R, C, 1] packed for the same GEMM block: [R' / 6, C, 6]
// float32, R' = R rounded up to a multiple of 6 (zero rows), once per weight.
torch::Tensor winograd_rows_weight(const torch::Tensor& weight);

// The whole WN layer after its in_layer's weights (no speaker conditioning): the gated unit of
// winograd_conv1d_gated, and its 1x1 res_skip convolution r = W acts + rs_bias (W [R, C_out / 2]
// packed by winograd_rows_weight) added in place while a block of 32 frames of the gated unit
// is in cache: residual += r[:C_out / 2] and skip += r[C_out / 2:] where residual is defined
// (R = C_out / 2 + S), skip += r otherwise (R = S; the last layer). residual may be x itself: x
// is read in full before any of it is updated. residual [B, C_out / 2, T] and skip [B, S, T]:
// contiguous float32. Each sum over C_out / 2 runs in one thread, in a fixed order.
void winograd_wn_layer(const torch::Tensor& x, const torch::Tensor& u, const torch::Tensor& bias,
                       const torch::Tensor& rs_weight, const torch::Tensor& rs_bias, torch::Tensor residual,
                       torch::Tensor skip);

}  // namespace monoflow::models
