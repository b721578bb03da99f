// Host-callable launchers of the relative-position attention's row kernels (rows of T: float,
// __half or __nv_bfloat16, the mask and the arithmetic in float; raw device pointers;
// rel_attention_cuda.cpp holds the torch side and the batched products around them).
//
// The attention of one head over l positions, with shared relative embeddings over a window of
// +-w (the official attentions.py with window_size = w), is, per query row i:
//   z_j = S_ij / scale + (|j - i| <= w ? R_i,j-i+w / scale : 0),  or -1e4 where mask_ij == 0,
//   P = dropout(softmax(z)),  out_i = sum_j P_ij V_j + sum_r B_ir E_v[r],  B_ir = P_i,i+r-w,
// with S = Q K^T and R = Q E_k^T. The composite builds R's [l, 2l - 1] padded form and moves it
// to absolute positions with two pads and a reshape, and B likewise; these kernels read and
// write the 2w + 1 band directly, in the same pass as the softmax.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "models/kernels/philox_dropout.h"

namespace monoflow::models::kernels {

// rows = batch * heads * length query rows of `length` keys; mask [batch, length, length]
// (one per item, shared by the heads); band arrays [rows, 2 * window + 1].
struct RelativeRows {
  int64_t batch, heads, length, window;
  float scale;  // sqrt(head channels)
};

// weights = softmax(z) (saved for backward); dropped = dropout(weights), or nullptr without
// dropout (then dropped is weights); band = B of `dropped`.
template <typename T>
cudaError_t launch_relative_softmax_forward(const T* scores, const T* rel, const float* mask, T* weights, T* dropped,
                                            T* band, RelativeRows rows, PhiloxDropout dropout, cudaStream_t stream);

// grad: in, dL/d(dropped) from the products (dP); out, dL/dS (the gradient of the scores
// before their scale), in place. grad_band: dL/dB. grad_rel: out, dL/dR.
template <typename T>
cudaError_t launch_relative_softmax_backward(T* grad, const T* grad_band, const T* weights, const float* mask,
                                             T* grad_rel, RelativeRows rows, PhiloxDropout dropout,
                                             cudaStream_t stream);

}  // namespace monoflow::models::kernels
