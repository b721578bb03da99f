// Host-callable launchers of the decoder flows' fused kernels (raw pointers, a stream, no torch
// headers; flow_fused_cuda.cpp is the torch side). Tensors are float32, contiguous [B, C, T];
// mask is [B, T] (1 inside an utterance, 0 in its padding).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace monoflow::models::kernels {

// ActNorm: y = (bias[c] + exp(logs[c]) * x) * mask[b, t].
cudaError_t launch_actnorm_forward(const float* x, const float* logs, const float* bias, const float* mask, float* y,
                                   int64_t batch, int64_t channels, int64_t time, cudaStream_t stream);

// Its backward: grad_x = grad_y * exp(logs[c]) * mask, and per (channel, chunk of the batch)
// partial sums of the parameter gradients, summed by the caller (deterministic, no atomics):
//   partial_bias[c][k] = sum grad_y * mask,  partial_logs[c][k] = sum grad_y * mask * exp(logs[c]) * x.
// `chunks`: how many pieces the batch is cut into per channel (the partials' second axis).
cudaError_t launch_actnorm_backward(const float* x, const float* logs, const float* mask, const float* grad_y,
                                    float* grad_x, float* partial_logs, float* partial_bias, int64_t batch,
                                    int64_t channels, int64_t time, int chunks, cudaStream_t stream);

// InvConvNear with n_split = 4: the channels form C / 4 groups of 4, channel(j, g) =
// (j / 2) * C / 2 + g * 2 + j % 2 (the official view/permute), and each group is mixed by the
// 4x4 matrix w: z[channel(i, g)] = mask * sum_j w[i][j] x[channel(j, g)].
cudaError_t launch_invconv4_forward(const float* x, const float* w, const float* mask, float* z, int64_t batch,
                                    int64_t channels, int64_t time, cudaStream_t stream);

// Its backward: grad_x[channel(j, g)] = sum_i w[i][j] * mask * grad_z[channel(i, g)], and per
// block partial sums of grad_w[i][j] = sum mask * grad_z[channel(i, g)] * x[channel(j, g)]
// into partial_w [blocks, 16] (the caller sums them; `blocks` is returned through *blocks_out
// when partial_w is null, so that the caller can size it).
cudaError_t launch_invconv4_backward(const float* x, const float* w, const float* mask, const float* grad_z,
                                     float* grad_x, float* partial_w, int64_t batch, int64_t channels, int64_t time,
                                     int* blocks_out, cudaStream_t stream);

// The affine coupling's transform, C channels split into halves of H = C / 2:
//   z[:, :H] = x[:, :H],  z[:, H:] = (m + exp(logs) * x[:, H:]) * mask,
// with (m, logs) the halves of `out` + bias, `out` channels-last ([B, T, C] memory, element type
// O: float, __half or __nv_bfloat16, as the end convolution leaves it) and x, z contiguous
// [B, C, T] float. partial_logdet [B, tiles]: per-tile sums of logs * mask (tiles from
// coupling_tiles), which the caller sums.
int coupling_tiles(int64_t half, int64_t time);
template <typename O>
cudaError_t launch_coupling_forward(const float* x, const O* out, const float* bias, const float* mask, float* z,
                                    float* partial_logdet, int64_t batch, int64_t channels, int64_t time,
                                    cudaStream_t stream);

// Its backward, from grad_z and grad_logdet [B]: grad_x (contiguous) and grad_out
// (channels-last, type O); the bias gradient is grad_out's column sums (the caller's). It reads
// the forward's output z, not x (x_1 = (z_1 - m) exp(-logs) where mask is 1), so that the
// forward keeps no copy of its input alive.
template <typename O>
cudaError_t launch_coupling_backward(const float* z, const O* out, const float* bias, const float* mask,
                                     const float* grad_z, const float* grad_logdet, float* grad_x, O* grad_out,
                                     int64_t batch, int64_t channels, int64_t time, cudaStream_t stream);

// The coupling network's input: rows [B, T, H] of R (float, __half or __nv_bfloat16; the
// ChannelsLast memory of [B, H, 1, T]) from x's first half, x contiguous [B, C, T] float with
// H = C / 2; and backward grad_x[:, :H] += grad_rows transposed, in place.
template <typename R>
cudaError_t launch_coupling_rows_forward(const float* x, R* rows, int64_t batch, int64_t channels, int64_t time,
                                         cudaStream_t stream);
template <typename R>
cudaError_t launch_coupling_rows_backward(const R* grad_rows, float* grad_x, int64_t batch, int64_t channels,
                                          int64_t time, cudaStream_t stream);

}  // namespace monoflow::models::kernels
