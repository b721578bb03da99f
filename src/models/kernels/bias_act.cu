// The text encoder's convolution epilogues (bias_act_kernels.h): the bias, ReLU, dropout and the
// mask that ATen ran as four broadcasting or element-wise kernels forward (the bias and the mask
// over [B, C, T] with stride-0 operands, which ATen's vectorised path does not take) and five
// back (the bias's gradient as two reductions), here one each way. One warp per (item, channel)
// row of T values: each lane takes four consecutive times, so that with T % 4 == 0 its four
// elements are one Philox block (one evaluation for four uniforms), and the warp's sum of the
// row's gradient is the bias's partial sum for that row.
//
// v2 (this file): the activations in float, __half or __nv_bfloat16 (the text side under bf16
// autocast), the arithmetic, the bias, the mask and the bias's partial sums in float; a lane's
// four elements one 8-byte access in 16-bit types.
#include "models/kernels/bias_act_kernels.h"

#include "models/kernels/element_types.cuh"
#include "models/kernels/philox_dropout.cuh"

#include <cstdint>
#include <initializer_list>

namespace monoflow::models::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

// The four uniforms of elements e .. e + 3 of a row: one Philox block when e % 4 == 0, else one
// evaluation per element (a row length that is not a multiple of 4).
__device__ __forceinline__ float4 uniforms_at(const Dropout& d, uint64_t e) {
  if (e % 4 == 0) return uniform4(d, e / 4);
  float u[4];
  for (int k = 0; k < 4; ++k) {
    const float4 v = uniform4(d, (e + k) / 4);
    const int lane = static_cast<int>((e + k) % 4);
    u[k] = lane == 0 ? v.x : lane == 1 ? v.y : lane == 2 ? v.z : v.w;
  }
  return make_float4(u[0], u[1], u[2], u[3]);
}

__device__ __forceinline__ float component(const float4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// Up to four values from p (n of them, the rest 0), in float: one access of 4 * sizeof(T) bytes
// where `vec` says that p is aligned and all four are there.
template <typename T>
__device__ __forceinline__ float4 load4(const T* p, int64_t n, bool vec) {
  if (vec && n >= 4) {
    const Pack<T, 4> v = load<T, 4>(p);
    return make_float4(to_float(v.v[0]), to_float(v.v[1]), to_float(v.v[2]), to_float(v.v[3]));
  }
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < 4 && k < n; ++k) v[k] = to_float(p[k]);
  return make_float4(v[0], v[1], v[2], v[3]);
}

// Rounds to T on the way out (round to nearest even).
template <typename T>
__device__ __forceinline__ void store4(T* p, const float4& v, int64_t n, bool vec) {
  if (vec && n >= 4) {
    Pack<T, 4> out;
    for (int k = 0; k < 4; ++k) out.v[k] = from_float<T>(component(v, k));
    store<T, 4>(p, out);
    return;
  }
  for (int k = 0; k < 4 && k < n; ++k) p[k] = from_float<T>(component(v, k));
}

template <typename T>
__global__ void bias_act_forward_kernel(const T* __restrict__ y, const float* __restrict__ bias,
                                        const float* __restrict__ mask, T* __restrict__ out, int64_t rows,
                                        int64_t c, int64_t t, bool relu, bool vec, PhiloxDropout dropout) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const Dropout d = unpack(dropout);
  const int lane = threadIdx.x % 32;
  const float b = bias[row % c];
  const float* m = mask ? mask + (row / c) * t : nullptr;
  const int64_t base = row * t;
  for (int64_t t0 = 4 * lane; t0 < t; t0 += 128) {
    const int64_t n = t - t0;
    const float4 u = d.enabled ? uniforms_at(d, static_cast<uint64_t>(base + t0)) : float4{};
    const float4 yv = load4(y + base + t0, n, vec);
    const float4 mv = m ? load4(m + t0, n, vec) : float4{1.0f, 1.0f, 1.0f, 1.0f};
    float r[4];
    for (int k = 0; k < 4; ++k) {
      float v = component(yv, k) + b;
      if (relu) v = v <= 0.0f ? 0.0f : v;  // as torch.relu: a NaN stays NaN (fmaxf would zero it)
      if (d.enabled) v = component(u, k) < d.keep ? v * d.scale : 0.0f;
      r[k] = v * component(mv, k);
    }
    store4(out + base + t0, make_float4(r[0], r[1], r[2], r[3]), n, vec);
  }
}

template <typename T>
__global__ void bias_act_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ out,
                                         const float* __restrict__ mask, T* __restrict__ grad_y,
                                         float* __restrict__ row_sums, int64_t rows, int64_t c, int64_t t, bool relu,
                                         bool vec, PhiloxDropout dropout) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const Dropout d = unpack(dropout);
  const int lane = threadIdx.x % 32;
  const float* m = mask ? mask + (row / c) * t : nullptr;
  const int64_t base = row * t;
  float sum = 0.0f;
  const bool draw = d.enabled && !relu;
  const float pass_scale = d.enabled ? d.scale : 1.0f;
  for (int64_t t0 = 4 * lane; t0 < t; t0 += 128) {
    const int64_t n = t - t0;
    const float4 u = draw ? uniforms_at(d, static_cast<uint64_t>(base + t0)) : float4{};
    const float4 gv = load4(grad_out + base + t0, n, vec);
    const float4 mv = m ? load4(m + t0, n, vec) : float4{1.0f, 1.0f, 1.0f, 1.0f};
    const float4 ov = relu ? load4(out + base + t0, n, vec) : float4{};
    float r[4];
    for (int k = 0; k < 4; ++k) {
      float g = component(gv, k) * component(mv, k);
      if (relu) {
        // out > 0 exactly where ReLU passed a positive value that dropout kept and the mask let through.
        g = component(ov, k) > 0.0f ? g * pass_scale : 0.0f;
      } else if (d.enabled) {
        g = component(u, k) < d.keep ? g * d.scale : 0.0f;
      }
      r[k] = g;
      if (k < n) sum += g;
    }
    store4(grad_y + base + t0, make_float4(r[0], r[1], r[2], r[3]), n, vec);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) row_sums[row] = sum;
}

int blocks_for(int64_t rows) { return static_cast<int>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

// One access of four elements where every row starts aligned: T % 4 == 0, the T buffers aligned
// to 4 * sizeof(T) bytes and the float mask to 16.
template <typename T>
bool vectorisable(int64_t t, std::initializer_list<const void*> buffers, const float* mask) {
  if (t % 4 != 0 || !aligned(mask, 16)) return false;
  for (const void* p : buffers) {
    if (!aligned(p, 4 * sizeof(T))) return false;
  }
  return true;
}

}  // namespace

template <typename T>
cudaError_t launch_bias_act_forward(const T* y, const float* bias, const float* mask, T* out, int64_t b,
                                    int64_t c, int64_t t, bool relu, const PhiloxDropout& dropout,
                                    cudaStream_t stream) {
  const int64_t rows = b * c;
  if (rows == 0 || t == 0) return cudaSuccess;
  bias_act_forward_kernel<<<blocks_for(rows), 32 * kWarpsPerBlock, 0, stream>>>(
      y, bias, mask, out, rows, c, t, relu, vectorisable<T>(t, {y, out}, mask), dropout);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_bias_act_backward(const T* grad_out, const T* out, const float* mask, T* grad_y, float* row_sums, int64_t b, int64_t c, int64_t t, bool relu,
                                     const PhiloxDropout& dropout, cudaStream_t stream) {
  const int64_t rows = b * c;
  if (rows == 0) return cudaSuccess;
  if (t == 0) return cudaMemsetAsync(row_sums, 0, rows * sizeof(float), stream);
  bias_act_backward_kernel<<<blocks_for(rows), 32 * kWarpsPerBlock, 0, stream>>>(
      grad_out, out, mask, grad_y, row_sums, rows, c, t, relu, vectorisable<T>(t, {grad_out, out, grad_y}, mask), dropout);
  return cudaGetLastError();
}

#define MONOFLOW_BIAS_ACT(T)                                                                                  \
  template cudaError_t launch_bias_act_forward<T>(const T*, const float*, const float*, T*, int64_t, int64_t,  \
                                                  int64_t, bool, const PhiloxDropout&, cudaStream_t);          \
  template cudaError_t launch_bias_act_backward<T>(const T*, const T*, const float*, T*, float*, int64_t,      \
                                                   int64_t, int64_t, bool, const PhiloxDropout&, cudaStream_t);
MONOFLOW_BIAS_ACT(float)
MONOFLOW_BIAS_ACT(__half)
MONOFLOW_BIAS_ACT(__nv_bfloat16)
#undef MONOFLOW_BIAS_ACT

}  // namespace monoflow::models::kernels
