// The relative-position attention's softmax rows, with the relative band and dropout fused in
// (kernels/rel_attention_kernels.h says what they compute).
//
// Why (profile of the bf16 training step, docs/history/benchmarks-2026-11.md): the text encoder's six attention
// layers ran ~40 kernels each way per layer around their three batched products: the
// [l, 2l - 1] relative logits and weights padded twice, reshaped and sliced each way, the
// scale's divisions, masked_fill, softmax and dropout with their backwards. A probe of one layer
// (dev/py/rel_attention_probe.py, B = 32, l = 184, graph replay) took 492 us forward and
// backward, 66 us of it the products.
//
// v1 (this file): one warp per query row, two passes over the row each way (an online max and
// sum, then the writes), the band read or written where |j - i| <= w. Dropout draws one Philox
// uniform per weight from its flat index (philox_dropout.cuh), so backward regenerates the mask
// and nothing but the softmax's output is kept. Arithmetic in float32, in the composite's order
// (each term divided by the scale, then added), so that results match it to a few ulp.
// v2 (this file): the rows in float, __half or __nv_bfloat16 (the text side under bf16
// autocast), the arithmetic and the mask in float, each stored value rounded once.
#include "models/kernels/rel_attention_kernels.h"

#include "models/kernels/element_types.cuh"

#include "models/kernels/philox_dropout.cuh"

#include <cfloat>

namespace monoflow::models::kernels {
namespace {

constexpr int kWarps = 8;  // query rows per block
constexpr float kMasked = -1e4f;  // the official masked_fill value

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One query row: its index among all rows, its item, query position, and the row pointers.
struct Row {
  int64_t index;  // (item * heads + head) * length + i
  int64_t i;
  const float* mask;  // the item's mask row i
  int64_t band_at;    // index * (2w + 1)

  __device__ __forceinline__ Row(int64_t row, const float* mask_all, const RelativeRows& s)
      : index(row), i(row % s.length) {
    const int64_t item = row / (s.length * s.heads);
    mask = mask_all + (item * s.length + i) * s.length;
    band_at = row * (2 * s.window + 1);
  }
  // The band slot of key j, or -1 outside the window.
  __device__ __forceinline__ int64_t band(int64_t j, int64_t window) const {
    const int64_t r = j - i + window;
    return r >= 0 && r <= 2 * window ? r : -1;
  }
};

// Zeroes the band slots whose key lies outside the row (near its ends).
template <typename T>
__device__ __forceinline__ void zero_band_outside(T* band, const Row& row, const RelativeRows& s, int lane) {
  for (int64_t r = lane; r <= 2 * s.window; r += 32) {
    const int64_t j = row.i + r - s.window;
    if (j < 0 || j >= s.length) band[row.band_at + r] = from_float<T>(0.0f);
  }
}

template <typename T>
__global__ void relative_softmax_forward(const T* __restrict__ scores, const T* __restrict__ rel,
                                         const float* __restrict__ mask, T* __restrict__ weights,
                                         T* __restrict__ dropped, T* __restrict__ band, RelativeRows s,
                                         PhiloxDropout dropout, int64_t rows) {
  const int lane = threadIdx.x % 32;
  const int64_t r0 = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  if (r0 >= rows) return;
  const Dropout d = unpack(dropout);
  const Row row(r0, mask, s);
  const T* z_row = scores + row.index * s.length;
  const auto logit = [&](int64_t j) {
    if (row.mask[j] == 0.0f) return kMasked;
    float z = to_float(z_row[j]) / s.scale;
    const int64_t b = row.band(j, s.window);
    if (b >= 0) z += to_float(rel[row.band_at + b]) / s.scale;
    return z;
  };
  // Pass 1: the row's max and sum of exp, online per lane, then across the warp.
  float m = -FLT_MAX, sum = 0.0f;
  for (int64_t j = lane; j < s.length; j += 32) {
    const float z = logit(j);
    if (z > m) {
      sum = sum * expf(m - z) + 1.0f;
      m = z;
    } else {
      sum += expf(z - m);
    }
  }
  float row_max = m;
  for (int o = 16; o > 0; o /= 2) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, o));
  const float row_sum = warp_sum(sum * expf(m - row_max));
  // Pass 2: the weights, their dropout and the band.
  T* w_row = weights + row.index * s.length;
  T* p_row = dropped ? dropped + row.index * s.length : w_row;
  for (int64_t j = lane; j < s.length; j += 32) {
    const float w = expf(logit(j) - row_max) / row_sum;
    w_row[j] = from_float<T>(w);
    float p = w;
    if (d.enabled) {
      p = keeps(d, static_cast<uint64_t>(row.index * s.length + j)) ? w * d.scale : 0.0f;
      p_row[j] = from_float<T>(p);
    }
    const int64_t b = row.band(j, s.window);
    if (b >= 0) band[row.band_at + b] = from_float<T>(p);
  }
  zero_band_outside(band, row, s, lane);
}

template <typename T>
__global__ void relative_softmax_backward(T* __restrict__ grad, const T* __restrict__ grad_band,
                                          const T* __restrict__ weights, const float* __restrict__ mask,
                                          T* __restrict__ grad_rel, RelativeRows s, PhiloxDropout dropout,
                                          int64_t rows) {
  const int lane = threadIdx.x % 32;
  const int64_t r0 = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  if (r0 >= rows) return;
  const Dropout d = unpack(dropout);
  const Row row(r0, mask, s);
  T* g_row = grad + row.index * s.length;
  const T* w_row = weights + row.index * s.length;
  // dL/dweights: the products' gradient plus the band's, through dropout's mask.
  const auto grad_weight = [&](int64_t j) {
    float g = to_float(g_row[j]);
    const int64_t b = row.band(j, s.window);
    if (b >= 0) g += to_float(grad_band[row.band_at + b]);
    if (d.enabled) g = keeps(d, static_cast<uint64_t>(row.index * s.length + j)) ? g * d.scale : 0.0f;
    return g;
  };
  float dot = 0.0f;
  for (int64_t j = lane; j < s.length; j += 32) dot += grad_weight(j) * to_float(w_row[j]);
  dot = warp_sum(dot);
  // Softmax's backward, masked_fill's (no gradient where masked), then the scale's.
  for (int64_t j = lane; j < s.length; j += 32) {
    const float dz = row.mask[j] == 0.0f ? 0.0f : to_float(w_row[j]) * (grad_weight(j) - dot);
    const float ds = dz / s.scale;
    g_row[j] = from_float<T>(ds);
    const int64_t b = row.band(j, s.window);
    if (b >= 0) grad_rel[row.band_at + b] = from_float<T>(ds);
  }
  zero_band_outside(grad_rel, row, s, lane);
}

int blocks_for(int64_t rows) { return static_cast<int>((rows + kWarps - 1) / kWarps); }

}  // namespace

template <typename T>
cudaError_t launch_relative_softmax_forward(const T* scores, const T* rel, const float* mask, T* weights, T* dropped,
                                            T* band, RelativeRows rows, PhiloxDropout dropout,
                                            cudaStream_t stream) {
  const int64_t n = rows.batch * rows.heads * rows.length;
  if (n == 0) return cudaSuccess;
  relative_softmax_forward<T><<<blocks_for(n), kWarps * 32, 0, stream>>>(scores, rel, mask, weights,
                                                                      dropout.enabled ? dropped : nullptr, band, rows,
                                                                      dropout, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_relative_softmax_backward(T* grad, const T* grad_band, const T* weights, const float* mask,
                                             T* grad_rel, RelativeRows rows,
                                             PhiloxDropout dropout, cudaStream_t stream) {
  const int64_t n = rows.batch * rows.heads * rows.length;
  if (n == 0) return cudaSuccess;
  relative_softmax_backward<T><<<blocks_for(n), kWarps * 32, 0, stream>>>(grad, grad_band, weights, mask, grad_rel, rows,
                                                                       dropout, n);
  return cudaGetLastError();
}

#define MONOFLOW_RELATIVE_SOFTMAX(T)                                                                        \
  template cudaError_t launch_relative_softmax_forward<T>(const T*, const T*, const float*, T*, T*, T*,      \
                                                          RelativeRows, PhiloxDropout, cudaStream_t);        \
  template cudaError_t launch_relative_softmax_backward<T>(T*, const T*, const T*, const float*, T*,         \
                                                           RelativeRows, PhiloxDropout, cudaStream_t);
MONOFLOW_RELATIVE_SOFTMAX(float)
MONOFLOW_RELATIVE_SOFTMAX(__half)
MONOFLOW_RELATIVE_SOFTMAX(__nv_bfloat16)
#undef MONOFLOW_RELATIVE_SOFTMAX

}  // namespace monoflow::models::kernels
