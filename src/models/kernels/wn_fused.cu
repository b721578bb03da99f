// The WN layer's elementwise work in two kernels per direction instead of ~10.
//
// Why (profile of the training step, docs/history/benchmarks-2026-11.md): the 48 WN layers of the decoder ran
// tanh, sigmoid and their product on strided channel halves, and in backward tanh_backward,
// sigmoid_backward, two products and a concatenation; the residual and skip updates added
// three more strided kernels forward and three backward. Each is a full pass over a
// [B, 192..384, T] tensor with non-vectorised indexing.
//
// v1: one thread per pack of V consecutive elements of one channel half (V = 16 bytes /
// element size when the span and the pointers allow, else 1), grid-stride loop. The gate's
// backward recomputes tanh and sigmoid from the input, which is all it keeps.
// v2: the gate also takes the in_layer's bias and dropout (Philox, regenerated in backward),
// which removes the convolution's bias add, dropout's two kernels and its mask.
// v3: one Philox evaluation per four elements instead of curand's two (uniform4), the same
// numbers bit for bit.
// v4: under autocast the residual update also writes x_out in the res_skip dtype, the next
// in_layer's input, and its backward adds that copy's gradient: the cast, its backward copy
// and the gradients' sum were three kernels per layer (bf16 profile).
// v5: the gate was compute-bound (its bf16 backward took longer than float32's):
// backward drew each element's Philox uniform twice (for the dropped input and for the mask),
// now once; for 16-bit types forward records the mask as bits (one byte per 8 elements,
// 1/16 of the input) and backward reads them instead; bf16 takes the hardware's tanh.approx.
// v6: with channels-last rows, the backward kernels also sum the bias's gradient as
// they write it (a block of kBiasSumRows rows into one partial row, in float, before rounding);
// column_sums.cu's second pass adds the partial rows. The separate first pass read each
// [B * T, 384] gradient again: 84 calls a step, 1.0 ms in TF32 (H100 eager profile). The gate
// sums only in float (gate_backward_sums_bias says why); the graphed TF32 step 0.7 ms shorter
// (docs/benchmarks.md).
// v7 (this file): the update without its skip half or without x (the masked sum of
// wn_fused.h): a WN's last layer adds its output to the skip sum and masks it, a coupling's
// start adds its bias and masks, each one kernel a way with its bias sums; they were an add,
// a product with the broadcast mask (strided kernels on channels-last rows), their backwards
// and a cast: 132 fewer kernels a step, bf16 graphed step 0.6 ms shorter (docs/benchmarks.md).
// Arithmetic in float; tanhf/expf (not the fast intrinsics) so that fp32 results match
// the composite ops to a few ulp.
#include "models/kernels/wn_kernels.h"

#include "models/kernels/column_sums_kernels.h"
#include "models/kernels/element_types.cuh"
#include "models/kernels/philox_dropout.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace monoflow::models::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t work) {
  return static_cast<int>(std::min<int64_t>((work + kThreads - 1) / kThreads, 65536));
}

// A pack's place in an [outer, span] tensor: row o, first element r.
struct PackAt {
  int64_t o, r;
};

// The kernels' grid-stride loop over the packs of V elements of an [outer, span] tensor (span a
// multiple of V), as a range: for (const auto [o, r] : Packs<V>(outer, span)). A range rather
// than a helper taking a lambda, which changed how nvcc unrolled the gate's backward loop.
template <int V>
struct Packs {
  struct Iterator {
    int64_t p, packs, total;
    __device__ __forceinline__ PackAt operator*() const {
      const int64_t o = p / packs;
      return {o, (p - o * packs) * V};
    }
    __device__ __forceinline__ Iterator& operator++() {
      p += int64_t(gridDim.x) * blockDim.x;
      return *this;
    }
    __device__ __forceinline__ bool operator!=(const Iterator&) const { return p < total; }  // only against end()
  };

  __device__ __forceinline__ Packs(int64_t outer, int64_t span) : packs(span / V), total(outer * packs) {}
  __device__ __forceinline__ Iterator begin() const {
    return {blockIdx.x * int64_t(blockDim.x) + threadIdx.x, packs, total};
  }
  __device__ __forceinline__ Iterator end() const { return {total, packs, total}; }

  int64_t packs, total;
};

// ---- tanh-sigmoid gate, with the in_layer's bias and dropout ---------------------------------
// Dropout's keep decisions of V consecutive input elements e0 .. e0 + V - 1 (V <= 8) as bits
// (bit k: element e0 + k kept), drawn from Philox.
template <int V>
__device__ __forceinline__ uint32_t draw_keep_bits(int64_t e0, const Dropout& d) {
  uint32_t bits = 0;
  if (V % 4 == 0 && e0 % 4 == 0) {
#pragma unroll
    for (int j = 0; j < V; j += 4) {
      const float4 u = uniform4(d, static_cast<uint64_t>(e0 + j) / 4);
      bits |= uint32_t(u.x < d.keep) << j | uint32_t(u.y < d.keep) << (j + 1) | uint32_t(u.z < d.keep) << (j + 2) |
              uint32_t(u.w < d.keep) << (j + 3);
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) bits |= uint32_t(keeps(d, static_cast<uint64_t>(e0 + k))) << k;
  }
  return bits;
}

// The same bits read back from a forward's record: bit e % 8 of byte e / 8.
template <int V>
__device__ __forceinline__ uint32_t read_keep_bits(const uint8_t* __restrict__ record, int64_t e0) {
  if (V == 8 && e0 % 8 == 0) return record[e0 / 8];
  uint32_t bits = 0;
#pragma unroll
  for (int k = 0; k < V; ++k) bits |= uint32_t(record[(e0 + k) / 8] >> ((e0 + k) % 8) & 1) << k;
  return bits;
}

template <int V>
__device__ __forceinline__ void apply_keep_bits(float* v, uint32_t bits, const Dropout& d) {
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = (bits >> k & 1) ? v[k] * d.scale : 0.0f;
}

// tanh and sigmoid: exact (tanhf, expf) for float and half, so that float results match the
// composite ops to a few ulp; for bf16 the hardware's tanh.approx (relative error ~5e-4,
// under bf16's rounding of 2e-3), sigmoid(x) = (1 + tanh(x / 2)) / 2: one instruction each
// where the exact functions cost tens, and the gate was compute-bound.
template <typename T>
__device__ __forceinline__ float gate_tanh(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  } else {
    return tanhf(x);
  }
}
template <typename T>
__device__ __forceinline__ float gate_sigmoid(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return fmaf(0.5f, gate_tanh<T>(0.5f * x), 0.5f);
  else return 1.0f / (1.0f + expf(-x));
}

// A pack's two halves (the gate's inputs) and their flat element indices.
struct HalfIndex {
  int64_t a, b;
  __device__ __forceinline__ HalfIndex(int64_t o, int64_t r, int64_t span) : a(o * 2 * span + r), b(a + span) {}
};

// The gate's two inputs at a pack: in + bias, then dropout by the given keep bits.
template <typename T, int V>
__device__ __forceinline__ void gate_inputs(const T* __restrict__ in, const float* __restrict__ bias, int64_t r,
                                            int64_t span, int64_t inner, const HalfIndex& e, const Dropout& d,
                                            uint32_t keep_a, uint32_t keep_b, float* a, float* b) {
  const auto pa = load<T, V>(in + e.a), pb = load<T, V>(in + e.b);
  const int64_t half_channels = span / inner;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    a[k] = to_float(pa.v[k]);
    b[k] = to_float(pb.v[k]);
    if (bias) {
      const int64_t c = inner == 1 ? r + k : (r + k) / inner;
      a[k] += bias[c];
      b[k] += bias[half_channels + c];
    }
  }
  if (d.enabled) {
    apply_keep_bits<V>(a, keep_a, d);
    apply_keep_bits<V>(b, keep_b, d);
  }
}

// keep_record: nullptr, or one byte per 8 input elements to record the mask in (V == 8 only).
template <typename T, int V>
__global__ void gate_forward(const T* __restrict__ in, const float* __restrict__ bias, T* __restrict__ acts,
                             uint8_t* __restrict__ keep_record, int64_t outer, int64_t span, int64_t inner,
                             PhiloxDropout dropout) {
  const Dropout d = unpack(dropout);
  for (const auto [o, r] : Packs<V>(outer, span)) {
    const HalfIndex e(o, r, span);
    uint32_t keep_a = 0, keep_b = 0;
    if (d.enabled) {
      keep_a = draw_keep_bits<V>(e.a, d);
      keep_b = draw_keep_bits<V>(e.b, d);
      if (V == 8 && keep_record) {
        keep_record[e.a / 8] = static_cast<uint8_t>(keep_a);
        keep_record[e.b / 8] = static_cast<uint8_t>(keep_b);
      }
    }
    float a[V], b[V];
    gate_inputs<T, V>(in, bias, r, span, inner, e, d, keep_a, keep_b, a, b);
    Pack<T, V> y;
#pragma unroll
    for (int k = 0; k < V; ++k) y.v[k] = from_float<T>(gate_tanh<T>(a[k]) * gate_sigmoid<T>(b[k]));
    store(acts + o * span + r, y);
  }
}

// The gate's backward at one pack: grad_in's two halves written, and returned in float (ga, gb)
// for the bias sums. keep_record: forward's record of the mask, or nullptr to draw it again.
template <typename T, int V>
__device__ __forceinline__ void gate_backward_pack(const T* __restrict__ in, const float* __restrict__ bias,
                                                   const T* __restrict__ grad_acts,
                                                   const uint8_t* __restrict__ keep_record, T* __restrict__ grad_in,
                                                   int64_t o, int64_t r, int64_t span, int64_t inner,
                                                   const Dropout& d, float* ga, float* gb) {
  const HalfIndex e(o, r, span);
  uint32_t keep_a = 0, keep_b = 0;
  if (d.enabled) {
    keep_a = keep_record ? read_keep_bits<V>(keep_record, e.a) : draw_keep_bits<V>(e.a, d);
    keep_b = keep_record ? read_keep_bits<V>(keep_record, e.b) : draw_keep_bits<V>(e.b, d);
  }
  float a[V], b[V];
  gate_inputs<T, V>(in, bias, r, span, inner, e, d, keep_a, keep_b, a, b);
  const auto g = load<T, V>(grad_acts + o * span + r);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float t = gate_tanh<T>(a[k]), s = gate_sigmoid<T>(b[k]), gk = to_float(g.v[k]);
    ga[k] = gk * s * (1.0f - t * t);
    gb[k] = gk * t * (s * (1.0f - s));
  }
  // Through dropout: the same mask, as a scale of 0 or 1 / keep.
  if (d.enabled) {
    apply_keep_bits<V>(ga, keep_a, d);
    apply_keep_bits<V>(gb, keep_b, d);
  }
  Pack<T, V> pa, pb;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    pa.v[k] = from_float<T>(ga[k]);
    pb.v[k] = from_float<T>(gb[k]);
  }
  store(grad_in + e.a, pa);
  store(grad_in + e.b, pb);
}

template <typename T, int V>
__global__ void gate_backward(const T* __restrict__ in, const float* __restrict__ bias, const T* __restrict__ grad_acts,
                              const uint8_t* __restrict__ keep_record, T* __restrict__ grad_in, int64_t outer,
                              int64_t span, int64_t inner, PhiloxDropout dropout) {
  const Dropout d = unpack(dropout);
  for (const auto [o, r] : Packs<V>(outer, span)) {
    float ga[V], gb[V];
    gate_backward_pack<T, V>(in, bias, grad_acts, keep_record, grad_in, o, r, span, inner, d, ga, gb);
  }
}

// ---- bias sums inside the backward kernels (channels-last rows) -----------------------------
// A block takes kBiasSumRows rows [rows, 2 * span] (inner == 1): `lanes` threads across a row,
// one pack of each half each, and `slots` rows in flight; each thread sums its two packs down
// its rows in float, then the slots' sums are added in order into the block's partial row.
// The order depends on the shape and the pack only, so the sums are the same on every run.
struct RowLanes {
  int lanes, slots;
};
__host__ __device__ inline RowLanes row_lanes(int64_t span, int v) {
  const int lanes = static_cast<int>(span / v);
  int slots = 1;
  while (2 * slots * lanes <= kThreads) slots *= 2;
  return {lanes, slots};
}

// A thread's running sums live in shared memory, not in registers (there the bf16 gate took 94
// registers a thread, here 78, against the plain kernel's 54): its V columns of each half, in
// its slot's row of sums [slots, 2 * span]. (Tried on one H100 and slower: one row a thread in blocks of
// kBiasSumRows rows with the sums laid out [row, half, k, lane] against bank conflicts, 30.8
// against 27.9 us for the float gate and 41.5 against 32.9 for the float update in
// dev/cuda/wn_backward_dev: blocks of 768 threads wait at the barrier, and fewer fit an SM.)
template <int V>
__device__ __forceinline__ float* zeroed_sums(float* sums, int64_t span, RowLanes rl) {
  const int lane = threadIdx.x % rl.lanes, slot = threadIdx.x / rl.lanes;
  float* mine = sums + slot * 2 * span + lane * V;
#pragma unroll
  for (int k = 0; k < V; ++k) mine[k] = mine[span + k] = 0.0f;
  return mine;
}
template <int V>
__device__ __forceinline__ void add_sums(float* mine, int64_t span, const float* a, const float* b) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    mine[k] += a[k];
    mine[span + k] += b[k];
  }
}

// The slots' sums added in order into partials[blockIdx.x, 2 * span].
__device__ __forceinline__ void write_partial_row(const float* sums, float* __restrict__ partials, int64_t span,
                                                  RowLanes rl) {
  __syncthreads();
  for (int64_t j = threadIdx.x; j < 2 * span; j += blockDim.x) {
    float s = 0.0f;
    for (int q = 0; q < rl.slots; ++q) s += sums[q * 2 * span + j];
    partials[blockIdx.x * 2 * span + j] = s;
  }
}

template <typename T, int V>
__global__ void gate_backward_summing(const T* __restrict__ in, const float* __restrict__ bias,
                                      const T* __restrict__ grad_acts, const uint8_t* __restrict__ keep_record,
                                      T* __restrict__ grad_in, float* __restrict__ partials, int64_t rows,
                                      int64_t span, PhiloxDropout dropout) {
  extern __shared__ float sums[];
  const Dropout d = unpack(dropout);
  const RowLanes rl = row_lanes(span, V);
  const int64_t r = int64_t(threadIdx.x % rl.lanes) * V;
  const int64_t first = blockIdx.x * kBiasSumRows, last = min(rows, first + kBiasSumRows);
  float* mine = zeroed_sums<V>(sums, span, rl);
  for (int64_t o = first + threadIdx.x / rl.lanes; o < last; o += rl.slots) {
    float ga[V], gb[V];
    gate_backward_pack<T, V>(in, bias, grad_acts, keep_record, grad_in, o, r, span, 1, d, ga, gb);
    add_sums<V>(mine, span, ga, gb);
  }
  write_partial_row(sums, partials, span, rl);
}

// ---- residual and skip update -------------------------------------------------------------
// V = 4 floats; a pack never straddles two (outer, inner) positions when inner == 1 (each
// element of a channels-last row shares one mask value) or when inner % V == 0.
// Without skip_out (a WN's last layer, a coupling's start) res_skip holds the res half only,
// [outer, span], and there is no skip output; without skip_sum (a WN's first layer) the skip
// sum starts from zero, without x the update does, and without x_out only x_low is written.
template <typename R, int V>
__global__ void residual_skip_forward(const float* __restrict__ x, const float* __restrict__ skip_sum,
                                      const R* __restrict__ res_skip, const float* __restrict__ bias,
                                      const float* __restrict__ mask,
                                      float* __restrict__ x_out, float* __restrict__ skip_out,
                                      R* __restrict__ x_low, int64_t outer, int64_t span, int64_t inner) {
  const int64_t stride = skip_out ? 2 * span : span;  // res_skip's row
  for (const auto [o, r] : Packs<V>(outer, span)) {
    const int64_t i = inner == 1 ? 0 : r % inner;
    Pack<float, V> xs{}, ss{};
    if (x) xs = load<float, V>(x + o * span + r);
    const auto res = load<R, V>(res_skip + o * stride + r);
    Pack<R, V> skip;
    if (skip_out) {
      if (skip_sum) ss = load<float, V>(skip_sum + o * span + r);
      skip = load<R, V>(res_skip + o * stride + span + r);
    }
    Pack<float, V> xo, so;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float m = mask[o * inner + (inner == 1 ? 0 : i + k)];
      float rk = to_float(res.v[k]), sk = skip_out ? to_float(skip.v[k]) : 0.0f;
      if (bias) {
        const int64_t c = inner == 1 ? r + k : (r + k) / inner;
        rk += bias[c];
        if (skip_out) sk += bias[span / inner + c];
      }
      xo.v[k] = (xs.v[k] + rk) * m;
      so.v[k] = ss.v[k] + sk;
    }
    if (x_out) store(x_out + o * span + r, xo);
    if (skip_out) store(skip_out + o * span + r, so);
    if (x_low) {
      Pack<R, V> lo;
#pragma unroll
      for (int k = 0; k < V; ++k) lo.v[k] = from_float<R>(xo.v[k]);
      store(x_low + o * span + r, lo);
    }
  }
}

// The update's backward at one pack: grad_x (where wanted) and grad_res_skip's halves written
// (the res half alone without grad_skip_out, as forward read it without skip_sum), and those
// halves returned in float (gres, gskip: zero without grad_skip_out) for the bias sums.
template <typename R, int V>
__device__ __forceinline__ void residual_skip_backward_pack(const float* __restrict__ grad_x_out,
                                                            const float* __restrict__ grad_skip_out,
                                                            const R* __restrict__ grad_x_low,
                                                            const float* __restrict__ mask, float* __restrict__ grad_x,
                                                            R* __restrict__ grad_res_skip, int64_t o, int64_t r,
                                                            int64_t span, int64_t inner, float* gres, float* gskip) {
  const int64_t i = inner == 1 ? 0 : r % inner;
  const int64_t stride = grad_skip_out ? 2 * span : span;
  Pack<float, V> gx{}, gs{};
  if (grad_x_out) gx = load<float, V>(grad_x_out + o * span + r);
  if (grad_skip_out) gs = load<float, V>(grad_skip_out + o * span + r);
  if (grad_x_low) {
    const auto gl = load<R, V>(grad_x_low + o * span + r);
#pragma unroll
    for (int k = 0; k < V; ++k) gx.v[k] += to_float(gl.v[k]);
  }
  Pack<float, V> gxm;
  Pack<R, V> pres, pskip;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float m = mask[o * inner + (inner == 1 ? 0 : i + k)];
    gxm.v[k] = gx.v[k] * m;
    gres[k] = gxm.v[k];
    gskip[k] = gs.v[k];
    pres.v[k] = from_float<R>(gres[k]);
    pskip.v[k] = from_float<R>(gskip[k]);
  }
  if (grad_x) store(grad_x + o * span + r, gxm);
  store(grad_res_skip + o * stride + r, pres);
  if (grad_skip_out) store(grad_res_skip + o * stride + span + r, pskip);
}

template <typename R, int V>
__global__ void residual_skip_backward(const float* __restrict__ grad_x_out, const float* __restrict__ grad_skip_out,
                                       const R* __restrict__ grad_x_low, const float* __restrict__ mask,
                                       float* __restrict__ grad_x,
                                       R* __restrict__ grad_res_skip, int64_t outer, int64_t span, int64_t inner) {
  for (const auto [o, r] : Packs<V>(outer, span)) {
    float gres[V], gskip[V];
    residual_skip_backward_pack<R, V>(grad_x_out, grad_skip_out, grad_x_low, mask, grad_x, grad_res_skip, o, r, span,
                                      inner, gres, gskip);
  }
}

template <typename R, int V>
__global__ void residual_skip_backward_summing(const float* __restrict__ grad_x_out,
                                               const float* __restrict__ grad_skip_out,
                                               const R* __restrict__ grad_x_low, const float* __restrict__ mask,
                                               float* __restrict__ grad_x, R* __restrict__ grad_res_skip,
                                               float* __restrict__ partials, int64_t rows, int64_t span) {
  extern __shared__ float sums[];
  const RowLanes rl = row_lanes(span, V);
  const int64_t r = int64_t(threadIdx.x % rl.lanes) * V;
  const int64_t first = blockIdx.x * kBiasSumRows, last = min(rows, first + kBiasSumRows);
  float* mine = zeroed_sums<V>(sums, span, rl);
  for (int64_t o = first + threadIdx.x / rl.lanes; o < last; o += rl.slots) {
    float gres[V], gskip[V];
    residual_skip_backward_pack<R, V>(grad_x_out, grad_skip_out, grad_x_low, mask, grad_x, grad_res_skip, o, r, span,
                                      1, gres, gskip);
    add_sums<V>(mine, span, gres, gskip);
  }
  write_partial_row(sums, partials, span, rl);
}

}  // namespace

// Packs of V: the span a multiple of V, 16-byte pointers, and (with a bias) a pack inside one
// channel or one channel per element (channels-last).
template <typename T>
bool gate_packs(int64_t span, int64_t inner, const void* a, const void* b, const void* c = nullptr) {
  constexpr int V = pack_of<T>();
  return span % V == 0 && (inner == 1 || inner % V == 0) && aligned(a, 16) && aligned(b, 16) &&
         (c == nullptr || aligned(c, 16));
}

template <typename T>
bool gate_records_keep_bits(int64_t span, int64_t inner, const void* in, const void* acts) {
  return pack_of<T>() == 8 && gate_packs<T>(span, inner, in, acts);
}

template <typename T>
cudaError_t launch_tanh_sigmoid_gate_forward(const T* in, const float* bias, T* acts, uint8_t* keep_record,
                                             int64_t outer, int64_t span, int64_t inner, PhiloxDropout dropout,
                                             cudaStream_t stream) {
  constexpr int V = pack_of<T>();
  if (gate_packs<T>(span, inner, in, acts)) {
    gate_forward<T, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(in, bias, acts, keep_record, outer,
                                                                               span, inner, dropout);
  } else {
    gate_forward<T, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(in, bias, acts, nullptr, outer, span,
                                                                           inner, dropout);
  }
  return cudaGetLastError();
}

// float only: in bf16 the gate's backward is bound by its arithmetic, and its summing kernel
// holds more registers (78 a thread against 54), so fewer threads are in flight: on one H100,
// `wn_backward_dev` (16,000 rows, H = 192) 30.6 us a call against 17.5 for the gate and the
// separate pass; in float 27.9 against 35.0. The residual update sums in every dtype (bf16 27.7
// against 30.0 us, float 32.9 against 35.3).
template <typename T>
bool gate_backward_sums_bias(int64_t outer, int64_t span, int64_t inner, const void* in, const void* grad_acts,
                             const void* grad_in) {
  return std::is_same_v<T, float> && outer > 0 && inner == 1 && gate_packs<T>(span, inner, in, grad_acts, grad_in) &&
         span / pack_of<T>() <= kThreads;
}

namespace {
// The bias sums' second pass where the rows took more than one block (else the kernel wrote
// grad_bias itself).
cudaError_t finish_bias_sums(const float* partials, int64_t blocks, int64_t columns, float* grad_bias,
                             cudaStream_t stream) {
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess || blocks == 1) return launched;
  return launch_column_finish(partials, blocks, columns, grad_bias, stream);
}
}  // namespace

template <typename T>
cudaError_t launch_tanh_sigmoid_gate_backward(const T* in, const float* bias, const T* grad_acts,
                                              const uint8_t* keep_record, T* grad_in, float* bias_partials,
                                              float* grad_bias, int64_t outer, int64_t span, int64_t inner,
                                              PhiloxDropout dropout, cudaStream_t stream) {
  constexpr int V = pack_of<T>();
  if (grad_bias) {
    const RowLanes rl = row_lanes(span, V);
    const int64_t blocks = bias_sum_blocks(outer);
    gate_backward_summing<T, V><<<static_cast<unsigned>(blocks), rl.lanes * rl.slots,
                                  sizeof(float) * rl.slots * 2 * span, stream>>>(
        in, bias, grad_acts, keep_record, grad_in, blocks == 1 ? grad_bias : bias_partials, outer, span, dropout);
    return finish_bias_sums(bias_partials, blocks, 2 * span, grad_bias, stream);
  }
  if (gate_packs<T>(span, inner, in, grad_acts, grad_in)) {
    gate_backward<T, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(in, bias, grad_acts, keep_record,
                                                                                grad_in, outer, span, inner, dropout);
  } else {
    gate_backward<T, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(in, bias, grad_acts, keep_record, grad_in,
                                                                            outer, span, inner, dropout);
  }
  return cudaGetLastError();
}

template <typename R>
cudaError_t launch_residual_skip_forward(const float* x, const float* skip_sum, const R* res_skip, const float* bias,
                                         const float* mask, float* x_out, float* skip_out, R* x_low, int64_t outer,
                                         int64_t span, int64_t inner, cudaStream_t stream) {
  constexpr int V = 4;
  const bool packed = span % V == 0 && (inner == 1 || inner % V == 0) && aligned(x, 16) && aligned(skip_sum, 16) &&
                      aligned(res_skip, V * sizeof(R)) && aligned(x_out, 16) && aligned(skip_out, 16) &&
                      aligned(x_low, V * sizeof(R));
  if (packed) {
    residual_skip_forward<R, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(
        x, skip_sum, res_skip, bias, mask, x_out, skip_out, x_low, outer, span, inner);
  } else {
    residual_skip_forward<R, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(
        x, skip_sum, res_skip, bias, mask, x_out, skip_out, x_low, outer, span, inner);
  }
  return cudaGetLastError();
}

// The backward kernels' pack of 4 floats: the span a multiple of it, a pack inside one mask
// value's run, 16-byte float pointers and 4-element R pointers.
template <typename R>
bool residual_backward_packs(int64_t span, int64_t inner, const float* grad_x_out, const float* grad_skip_out,
                             const R* grad_x_low, const float* grad_x, const R* grad_res_skip) {
  constexpr int V = 4;
  return span % V == 0 && (inner == 1 || inner % V == 0) && aligned(grad_x_out, 16) && aligned(grad_skip_out, 16) &&
         aligned(grad_x, 16) && aligned(grad_res_skip, V * sizeof(R)) && aligned(grad_x_low, V * sizeof(R));
}

template <typename R>
bool residual_skip_backward_sums_bias(int64_t outer, int64_t span, int64_t inner, const float* grad_x_out,
                                      const float* grad_skip_out, const R* grad_x_low, const float* grad_x,
                                      const R* grad_res_skip) {
  return outer > 0 && inner == 1 &&
         residual_backward_packs<R>(span, inner, grad_x_out, grad_skip_out, grad_x_low, grad_x, grad_res_skip) &&
         span / 4 <= kThreads;
}

template <typename R>
cudaError_t launch_residual_skip_backward(const float* grad_x_out, const float* grad_skip_out, const R* grad_x_low,
                                          const float* mask, float* grad_x, R* grad_res_skip, float* bias_partials,
                                          float* grad_bias, int64_t outer, int64_t span, int64_t inner,
                                          cudaStream_t stream) {
  constexpr int V = 4;
  if (grad_bias) {
    const RowLanes rl = row_lanes(span, V);
    const int64_t blocks = bias_sum_blocks(outer);
    residual_skip_backward_summing<R, V><<<static_cast<unsigned>(blocks), rl.lanes * rl.slots,
                                           sizeof(float) * rl.slots * 2 * span, stream>>>(
        grad_x_out, grad_skip_out, grad_x_low, mask, grad_x, grad_res_skip, blocks == 1 ? grad_bias : bias_partials,
        outer, span);
    return finish_bias_sums(bias_partials, blocks, 2 * span, grad_bias, stream);
  }
  if (residual_backward_packs<R>(span, inner, grad_x_out, grad_skip_out, grad_x_low, grad_x, grad_res_skip)) {
    residual_skip_backward<R, V><<<blocks_for(outer * span / V), kThreads, 0, stream>>>(
        grad_x_out, grad_skip_out, grad_x_low, mask, grad_x, grad_res_skip, outer, span, inner);
  } else {
    residual_skip_backward<R, 1><<<blocks_for(outer * span), kThreads, 0, stream>>>(
        grad_x_out, grad_skip_out, grad_x_low, mask, grad_x, grad_res_skip, outer, span, inner);
  }
  return cudaGetLastError();
}

#define MONOFLOW_GATE(T)                                                                                 \
  template bool gate_records_keep_bits<T>(int64_t, int64_t, const void*, const void*);                   \
  template cudaError_t launch_tanh_sigmoid_gate_forward<T>(const T*, const float*, T*, uint8_t*, int64_t, \
                                                           int64_t, int64_t, PhiloxDropout, cudaStream_t); \
  template bool gate_backward_sums_bias<T>(int64_t, int64_t, int64_t, const void*, const void*, const void*); \
  template cudaError_t launch_tanh_sigmoid_gate_backward<T>(const T*, const float*, const T*, const uint8_t*, \
                                                            T*, float*, float*, int64_t, int64_t, int64_t,   \
                                                            PhiloxDropout, cudaStream_t);
MONOFLOW_GATE(float)
MONOFLOW_GATE(__half)
MONOFLOW_GATE(__nv_bfloat16)
#undef MONOFLOW_GATE

#define MONOFLOW_RESIDUAL(R)                                                                                    \
  template cudaError_t launch_residual_skip_forward<R>(const float*, const float*, const R*, const float*,     \
                                                       const float*, float*, float*, R*, int64_t, int64_t,     \
                                                       int64_t, cudaStream_t);                                  \
  template bool residual_skip_backward_sums_bias<R>(int64_t, int64_t, int64_t, const float*, const float*,     \
                                                   const R*, const float*, const R*);                           \
  template cudaError_t launch_residual_skip_backward<R>(const float*, const float*, const R*, const float*,    \
                                                        float*, R*, float*, float*, int64_t, int64_t, int64_t,  \
                                                        cudaStream_t);
MONOFLOW_RESIDUAL(float)
MONOFLOW_RESIDUAL(__half)
MONOFLOW_RESIDUAL(__nv_bfloat16)
#undef MONOFLOW_RESIDUAL

}  // namespace monoflow::models::kernels
