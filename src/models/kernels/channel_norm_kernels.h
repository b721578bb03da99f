// Host-callable launchers of LayerNorm over the channels of a contiguous [B, C, T] tensor of T
// (float, __half or __nv_bfloat16; the statistics, gamma, beta, the mask and the sums in float),
// the Glow-TTS text side's normalisation (models/modules.h: LayerNorm), without moving the
// channels last (channel_norm.cu says why). channel_norm_cuda.cpp holds the torch side.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace monoflow::models::kernels {

// Time columns per block: the gamma/beta partial sums have one row per (item, tile of columns).
inline constexpr int kChannelNormColumns = 32;
inline int64_t channel_norm_tiles(int64_t b, int64_t t) {
  return b * ((t + kChannelNormColumns - 1) / kChannelNormColumns);
}

// y = m * ((s - mean) / sqrt(var + eps) * gamma + beta) per (item, time) column over its C
// channels (biased variance, two passes), s = x + residual (x where residual is null), m the
// mask [B, T] (1 where mask is null); mean and rstd [B, T] of s are kept for backward.
template <typename T>
cudaError_t launch_channel_norm_forward(const T* x, const T* residual, const float* mask, const float* gamma,
                                        const float* beta, T* y, float* mean, float* rstd, int64_t b, int64_t c,
                                        int64_t t, float eps, cudaStream_t stream);

// The gradient of s (x's and the residual's alike) from grad_y, with the forward's x, residual
// and mask; gamma's and beta's gradients as partial sums [channel_norm_tiles(b, t), C] (summed
// over their rows by the caller: deterministic, no atomics).
template <typename T>
cudaError_t launch_channel_norm_backward(const T* grad_y, const T* x, const T* residual, const float* mask,
                                         const float* gamma, const float* mean, const float* rstd, T* grad_x,
                                         float* grad_gamma_rows, float* grad_beta_rows, int64_t b, int64_t c,
                                         int64_t t, cudaStream_t stream);

}  // namespace monoflow::models::kernels
