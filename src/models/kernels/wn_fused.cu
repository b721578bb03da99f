// The WN layer's elementwise work in two kernels per direction instead of ~10.
//
// Why (profile of the training step, docs/benchmarks.md): the 48 WN layers of the decoder ran
// tanh, sigmoid and their product on strided channel halves, and in backward tanh_backward,
// sigmoid_backward, two products and a concatenation; the residual and skip updates added
// three more strided kernels forward and three backward. Each is a full pass over a
// [B, 192..384, T] tensor with non-vectorised indexing.
//
// v1 (this file): one thread per pack of V consecutive elements of one channel half (V = 16
// bytes / element size when the span and the pointers allow, else 1), grid-stride loop.
// The gate's backward recomputes tanh and sigmoid from the input, which is all it keeps.
// Arithmetic in float; tanhf/expf (not the fast intrinsics) so that fp32 results match
// the composite ops to a few ulp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "models/kernels/wn_kernels.h"

namespace monoflow::models::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load(const T* p) { return *reinterpret_cast<const Pack<T, V>*>(p); }
template <typename T, int V>
__device__ __forceinline__ void store(T* p, const Pack<T, V>& x) { *reinterpret_cast<Pack<T, V>*>(p) = x; }

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

int blocks_for(int64_t work) {
  return static_cast<int>(std::min<int64_t>((work + kThreads - 1) / kThreads, 65536));
}

bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// ---- tanh-sigmoid gate --------------------------------------------------------------------
template <typename T, int V>
__global__ void gate_forward(const T* __restrict__ in, T* __restrict__ acts, int64_t outer, int64_t span) {
  const int64_t packs = span / V, total = outer * packs;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = p / packs, r = (p - o * packs) * V;
    const T* row = in + o * 2 * span;
    const auto a = load<T, V>(row + r), b = load<T, V>(row + span + r);
    Pack<T, V> y;
#pragma unroll
    for (int k = 0; k < V; ++k) y.v[k] = from_float<T>(tanhf(to_float(a.v[k])) * sigmoid(to_float(b.v[k])));
    store(acts + o * span + r, y);
  }
}

template <typename T, int V>
__global__ void gate_backward(const T* __restrict__ in, const T* __restrict__ grad_acts, T* __restrict__ grad_in,
                              int64_t outer, int64_t span) {
  const int64_t packs = span / V, total = outer * packs;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = p / packs, r = (p - o * packs) * V;
    const T* row = in + o * 2 * span;
    const auto a = load<T, V>(row + r), b = load<T, V>(row + span + r);
    const auto g = load<T, V>(grad_acts + o * span + r);
    Pack<T, V> ga, gb;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float t = tanhf(to_float(a.v[k])), s = sigmoid(to_float(b.v[k])), gk = to_float(g.v[k]);
      ga.v[k] = from_float<T>(gk * s * (1.0f - t * t));
      gb.v[k] = from_float<T>(gk * t * (s * (1.0f - s)));
    }
    store(grad_in + o * 2 * span + r, ga);
    store(grad_in + o * 2 * span + span + r, gb);
  }
}

// ---- residual and skip update -------------------------------------------------------------
// V = 4 floats; a pack never straddles two (outer, inner) positions when inner == 1 (each
// element of a channels-last row shares one mask value) or when inner % V == 0.
template <typename R, int V>
__global__ void residual_skip_forward(const float* __restrict__ x, const float* __restrict__ skip_sum,
                                      const R* __restrict__ res_skip, const float* __restrict__ mask,
                                      float* __restrict__ x_out, float* __restrict__ skip_out, int64_t outer,
                                      int64_t span, int64_t inner) {
  const int64_t packs = span / V, total = outer * packs;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = p / packs, r = (p - o * packs) * V;
    const int64_t i = inner == 1 ? 0 : r % inner;
    const auto xs = load<float, V>(x + o * span + r), ss = load<float, V>(skip_sum + o * span + r);
    const auto res = load<R, V>(res_skip + o * 2 * span + r), skip = load<R, V>(res_skip + o * 2 * span + span + r);
    Pack<float, V> xo, so;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float m = mask[o * inner + (inner == 1 ? 0 : i + k)];
      xo.v[k] = (xs.v[k] + to_float(res.v[k])) * m;
      so.v[k] = ss.v[k] + to_float(skip.v[k]);
    }
    store(x_out + o * span + r, xo);
    store(skip_out + o * span + r, so);
  }
}

template <typename R, int V>
__global__ void residual_skip_backward(const float* __restrict__ grad_x_out, const float* __restrict__ grad_skip_out,
                                       const float* __restrict__ mask, float* __restrict__ grad_x,
                                       R* __restrict__ grad_res_skip, int64_t outer, int64_t span, int64_t inner) {
  const int64_t packs = span / V, total = outer * packs;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = p / packs, r = (p - o * packs) * V;
    const int64_t i = inner == 1 ? 0 : r % inner;
    const auto gx = load<float, V>(grad_x_out + o * span + r), gs = load<float, V>(grad_skip_out + o * span + r);
    Pack<float, V> gxm;
    Pack<R, V> gres, gskip;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float m = mask[o * inner + (inner == 1 ? 0 : i + k)];
      gxm.v[k] = gx.v[k] * m;
      gres.v[k] = from_float<R>(gxm.v[k]);
      gskip.v[k] = from_float<R>(gs.v[k]);
    }
    store(grad_x + o * span + r, gxm);
    store(grad_res_skip + o * 2 * span + r, gres);
    store(grad_res_skip + o * 2 * span + span + r, gskip);
  }
}

template <typename T>
constexpr int pack_of() { return 16 / sizeof(T); }

}  // namespace

template <typename T>
cudaError_t launch_tanh_sigmoid_gate_forward(const T* in, T* acts, int64_t outer, int64_t span, cudaStream_t stream) {
  constexpr int V = pack_of<T>();
  if (span % V == 0 && aligned(in, 16) && aligned(acts, 16)) {
    gate_forward<T, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(in, acts, outer, span);
  } else {
    gate_forward<T, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(in, acts, outer, span);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_tanh_sigmoid_gate_backward(const T* in, const T* grad_acts, T* grad_in, int64_t outer,
                                              int64_t span, cudaStream_t stream) {
  constexpr int V = pack_of<T>();
  if (span % V == 0 && aligned(in, 16) && aligned(grad_acts, 16) && aligned(grad_in, 16)) {
    gate_backward<T, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(in, grad_acts, grad_in, outer, span);
  } else {
    gate_backward<T, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(in, grad_acts, grad_in, outer, span);
  }
  return cudaGetLastError();
}

template <typename R>
cudaError_t launch_residual_skip_forward(const float* x, const float* skip_sum, const R* res_skip, const float* mask,
                                         float* x_out, float* skip_out, int64_t outer, int64_t span, int64_t inner,
                                         cudaStream_t stream) {
  constexpr int V = 4;
  const bool packed = span % V == 0 && (inner == 1 || inner % V == 0) && aligned(x, 16) && aligned(skip_sum, 16) &&
                      aligned(res_skip, V * sizeof(R)) && aligned(x_out, 16) && aligned(skip_out, 16);
  if (packed) {
    residual_skip_forward<R, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(
        x, skip_sum, res_skip, mask, x_out, skip_out, outer, span, inner);
  } else {
    residual_skip_forward<R, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(
        x, skip_sum, res_skip, mask, x_out, skip_out, outer, span, inner);
  }
  return cudaGetLastError();
}

template <typename R>
cudaError_t launch_residual_skip_backward(const float* grad_x_out, const float* grad_skip_out, const float* mask,
                                          float* grad_x, R* grad_res_skip, int64_t outer, int64_t span, int64_t inner,
                                          cudaStream_t stream) {
  constexpr int V = 4;
  const bool packed = span % V == 0 && (inner == 1 || inner % V == 0) && aligned(grad_x_out, 16) &&
                      aligned(grad_skip_out, 16) && aligned(grad_x, 16) && aligned(grad_res_skip, V * sizeof(R));
  if (packed) {
    residual_skip_backward<R, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(
        grad_x_out, grad_skip_out, mask, grad_x, grad_res_skip, outer, span, inner);
  } else {
    residual_skip_backward<R, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(
        grad_x_out, grad_skip_out, mask, grad_x, grad_res_skip, outer, span, inner);
  }
  return cudaGetLastError();
}

#define MONOFLOW_GATE(T)                                                                                        \
  template cudaError_t launch_tanh_sigmoid_gate_forward<T>(const T*, T*, int64_t, int64_t, cudaStream_t);      \
  template cudaError_t launch_tanh_sigmoid_gate_backward<T>(const T*, const T*, T*, int64_t, int64_t, cudaStream_t);
MONOFLOW_GATE(float)
MONOFLOW_GATE(__half)
MONOFLOW_GATE(__nv_bfloat16)
#undef MONOFLOW_GATE

#define MONOFLOW_RESIDUAL(R)                                                                                    \
  template cudaError_t launch_residual_skip_forward<R>(const float*, const float*, const R*, const float*,     \
                                                       float*, float*, int64_t, int64_t, int64_t, cudaStream_t); \
  template cudaError_t launch_residual_skip_backward<R>(const float*, const float*, const float*, float*, R*,   \
                                                        int64_t, int64_t, int64_t, cudaStream_t);
MONOFLOW_RESIDUAL(float)
MONOFLOW_RESIDUAL(__half)
MONOFLOW_RESIDUAL(__nv_bfloat16)
#undef MONOFLOW_RESIDUAL

}  // namespace monoflow::models::kernels
