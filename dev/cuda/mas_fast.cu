// dev/cuda/mas_fast.cu: the cuda-fast MAS kernels, version by version, beside a plain CPU
// reference and their benchmark (in the manner of llm.c's dev/cuda). No torch: it builds in
// seconds with nvcc, for quick iteration on the GPU machine. Each version returns exactly the
// reference's durations; what each changes against the one before, and why:
//
//   v1 (here, forward_v1, then the walk): the split scheme of
//      src/align/kernels/mas_fast_pipeline.cuh (one warp per 32*K text rows, the warps of an
//      utterance a pipeline through a global boundary buffer). The 32-column chunk is fully
//      unrolled, with compile-time register indices for the boundary values and bit
//      positions; the hand-over is fenced: lane 31 of warp w+1 polls warp w's progress
//      counter with GPU-scope acquire loads, and warp w publishes each chunk's last row with
//      a release store after it. K=4 and 16-byte rows (VEC=4) only, where it was measured.
//   v2 (here, forward_rolled with FencedHandover): the chunk as a rolled loop over 8 groups
//      of 4 columns (chunk_rolled), lane 31's boundary values through shared memory; the same
//      fenced hand-over. Small code did not help: the instruction cache is not what limits a
//      column step. K=4 or 8, VEC=4 or 1.
//   v3 (production's fallback, src/align/kernels/mas_fast_forward.cu, run here through its
//      launcher): v2 with a fence-free hand-over: each published value carries its column in
//      the upper half of a 64-bit entry, so the writer needs no GPU-scope fence per chunk
//      (which also waited for its in-flight tile loads). Faster at long T; mas_cuda.cpp runs
//      it wherever v4's block does not fit.
//   v4 (production, src/align/kernels/mas_fast_fused.cu, through its launcher): forward and
//      walk fused in one block per utterance, hand-over through shared memory, decision bits
//      kept on chip; that file's header lists what it changes and what was tried. K=2 or 4,
//      where the block fits in shared memory.
// The timings of every version: docs/history/benchmarks-2026-11.md, "MAS" (and "cuda-fast v4").
//
// Shared with src (headers only; the .cu files are linked, as monoflow_align_kernels):
// align/kernels/mas_kernels.h (launchers, workspace layout), mas_fast_common.cuh and
// mas_fast_pipeline.cuh (device code v1-v3 share), and common/synthetic_batch.h (the
// benchmarks' LJSpeech-shaped lengths).
//
//   build/bin/mas_fast_dev (built with the project where CUDA is enabled), or by hand:
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -Isrc dev/cuda/mas_fast.cu \
//        src/align/kernels/mas_fast_{forward,walk,fused}.cu -o mas_fast
//   ./mas_fast [--shape training|B,T,S[:B,T,S...]] [--variants 1,2,3,4] [--k 2,4,8]
//              [--repeats N] [--seed N] [--padded] [--ties] [--check]
// (v1 needs K=4 and S % 4 == 0, v2/v3 K=4 or 8, v4 K=2 or 4 and a block that fits; the
// combinations that do not apply are skipped.) --padded gives items after the first random
// lengths with garbage (nan, inf) outside them, --ties small multiples of 1/4 as logp (many
// equal scores), as tests/align does; --repeats 0 skips the timings. Exit status: 0, or 1 when
// a version differs from the reference, 77 without a GPU (ctest mas_fast_dev_vs_cpu skips).
//
// For chunk timings, build by hand with -DMONOFLOW_MAS_TRACE -rdc=true (the kernels' .cu files
// then read mas_trace, defined here): it prints clock64() cycles per 32-column chunk of item 0
// (mas_fast_common.cuh), which splits a column step's cost by chunk kind.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "align/kernels/mas_fast_pipeline.cuh"
#include "align/kernels/mas_kernels.h"
#include "common/synthetic_batch.h"

namespace monoflow::align::kernels {
#ifdef MONOFLOW_MAS_TRACE
__device__ long long mas_trace[kTraceWarps * kTraceChunks];
#endif

namespace {

// Lane 31 of v1/v2: waits until the previous warp has published what the chunk at y0 needs,
// then loads f[k] = Q[x0-1][y0-4+k], k < 36 (so f[c+3] is the value for column y0+c).
__device__ __forceinline__ void fetch_boundary(float (&f)[36], WarpTask& t, int y0) {
  const int need = min(y0 + 31, t.up_last + 1);
  for (int polls = 0; !t.gave_up && load_acquire(t.progress + t.w - 1) < need; ++polls) {
    if (polls == kMaxPolls) {
      atomicExch(t.stalled, 1);
      t.gave_up = true;
    }
  }
  const float* src = t.up_row + y0 - 4;
#pragma unroll
  for (int k = 0; k < 9; ++k) {  // volatile: ordered after the acquire by the compiler too
    asm volatile("ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(f[4 * k]), "=f"(f[4 * k + 1]), "=f"(f[4 * k + 2]), "=f"(f[4 * k + 3])
                 : "l"(src + 4 * k)
                 : "memory");
  }
}

// The column this warp has published up to after the chunk at y0.
template <int K>
__device__ __forceinline__ int published_after(const WarpTask& t, int y0) {
  return min(y0 + 32, t.band_width + t.x0 + 32 * K);
}

// ---------------------------------------------------------------------------------------
// v1: the whole 32-column chunk unrolled.
template <int K, bool MASKED>
__device__ __forceinline__ void chunk_v1(const float* tile, float (&q)[K], const float (&up)[36],
                                         float (&out)[32], uint32_t (&word)[K], float (&check)[K],
                                         int lane, int x, int y0, int band_width, int text_len,
                                         float neg_inf) {
#pragma unroll
  for (int g = 0; g < 8; ++g) {
    float4 v[K];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      v[j] = *reinterpret_cast<const float4*>(tile + tile_index<K>(lane * K + j, g * 4));
    }
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      const int c = g * 4 + cc;
      const float send = (lane == 31) ? up[c + 3] : q[K - 1];
      const float from_above = __shfl_sync(kFullMask, send, (lane + 31) & 31);
      float val[K];
#pragma unroll
      for (int j = 0; j < K; ++j) val[j] = component(v[j], cc);
      column_step<K, MASKED>(q, check, word, val, from_above, 1u << c, x, y0 + c, band_width,
                             text_len, neg_inf);
      out[c] = q[K - 1];
    }
  }
}

template <int K, int VEC>
__global__ void __launch_bounds__(32) forward_v1(const float* __restrict__ logp, int max_text,
                                                 int max_mel, DeviceLengths text_lengths,
                                                 DeviceLengths mel_lengths, float neg_inf,
                                                 FastMasLayout layout, int32_t* ws) {
  extern __shared__ __align__(16) float tiles[];
  const int lane = threadIdx.x;
  WarpTask t;
  if (!take_task<K>(t, logp, max_text, max_mel, text_lengths, mel_lengths, layout, ws, lane)) return;
  float q[K], check[K];
  start_rows<K>(q, check, neg_inf);
  float up[36], up_next[36], out[32];
  if (t.w == 0) virtual_boundary(up, t.y_first, neg_inf);
  else if (lane == 31) fetch_boundary(up, t, t.y_first);

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue_tile<K, VEC>(tiles, t, max_mel, s, lane);
  for (int i = 0; i < t.chunks; ++i) {
    MONOFLOW_TRACE(t.b, t.w, i, lane)
    const int y0 = t.y_first + 32 * i;
    issue_tile<K, VEC>(tiles, t, max_mel, i + kStages - 1, lane);
    if (i + 1 < t.chunks) {
      if (t.w == 0) virtual_boundary(up_next, y0 + 32, neg_inf);
      else if (lane == 31) fetch_boundary(up_next, t, y0 + 32);
    }
    const float* tile = await_tile<K>(tiles, i);
    uint32_t word[K] = {};
    if (inner_chunk<K>(t, y0)) {
      chunk_v1<K, false>(tile, q, up, out, word, check, lane, t.x, y0, t.band_width, t.text_len, neg_inf);
    } else {
      chunk_v1<K, true>(tile, q, up, out, word, check, lane, t.x, y0, t.band_width, t.text_len, neg_inf);
    }
    __syncwarp();  // the stage is refilled next iteration
    store_bits<K>(t, y0, layout.padded_text, word);
    if (lane == 31 && t.publishes) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        __stcg(reinterpret_cast<float4*>(t.my_row + y0) + k,
               make_float4(out[4 * k], out[4 * k + 1], out[4 * k + 2], out[4 * k + 3]));
      }
      store_release(t.progress + t.w, published_after<K>(t, y0));
    }
#pragma unroll
    for (int k = 0; k < 36; ++k) up[k] = up_next[k];
  }
  report_non_finite<K>(check, ws, layout.batch, t.b);
}

// ---------------------------------------------------------------------------------------
// v2: forward_rolled (mas_fast_pipeline.cuh) with v1's fenced hand-over.
template <int K>
struct FencedHandover {
  float f[36];  // Q[x0-1][y0-4+k] of the chunk being fetched
  __device__ __forceinline__ void prefetch(WarpTask& t, int y0, float neg_inf) {
    if (t.w == 0) virtual_boundary(f, y0, neg_inf);
    else fetch_boundary(f, t, y0);
  }
  __device__ __forceinline__ void stage(float* up_s, WarpTask&, int) { stage_boundary(up_s, f); }
  __device__ __forceinline__ void publish_group(const WarpTask& t, int y, const float4& out) {
    __stcg(reinterpret_cast<float4*>(t.my_row + y), out);
  }
  __device__ __forceinline__ void publish_chunk(const WarpTask& t, int y0, int) {
    store_release(t.progress + t.w, published_after<K>(t, y0));
  }
};

}  // namespace
}  // namespace monoflow::align::kernels

namespace {

using monoflow::align::kernels::DeviceLengths;
using monoflow::align::kernels::FastMasLayout;
namespace kernels = monoflow::align::kernels;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Batch {
  int batch = 0, max_text = 0, max_mel = 0;
  std::vector<long long> text, mel;
  std::vector<float> logp;  // [B, T, S]
};

// The benchmarks' training batch (common/synthetic_batch.h: the first batch of the seed,
// 1234 by default, as bench_mas and bench_train_step take it), or B,T,S: full lengths, or with
// `padded` random lengths for the items after the first (text U[1, T], mel U[text, S]) and
// garbage (nan, inf) outside every item's lengths. logp ~ N(0, 1), or with `ties` multiples of 1/4 in [-3, 3], from the
// same stream.
Batch make_batch(const std::string& shape, unsigned seed, bool padded, bool ties) {
  monoflow::SyntheticBatches gen(seed);
  std::mt19937_64& rng = gen.rng();
  Batch b;
  if (shape == "training") {
    b.batch = 32;
    const monoflow::SyntheticLengths l = gen.next_lengths(b.batch);
    b.text.assign(l.text.begin(), l.text.end());
    b.mel.assign(l.mel.begin(), l.mel.end());
    b.max_text = static_cast<int>(l.max_text());
    b.max_mel = static_cast<int>(l.max_mel());
  } else {
    std::stringstream list(shape);
    std::string n;
    std::vector<int> v;
    while (std::getline(list, n, ',')) v.push_back(std::stoi(n));
    if (v.size() != 3) throw std::runtime_error("--shape takes training or B,T,S");
    b.batch = v[0], b.max_text = v[1], b.max_mel = v[2];
    b.text.assign(b.batch, b.max_text);
    b.mel.assign(b.batch, b.max_mel);
    for (int i = 1; padded && i < b.batch; ++i) {
      b.text[i] = std::uniform_int_distribution<int>(1, b.max_text)(rng);
      b.mel[i] = std::uniform_int_distribution<int>(static_cast<int>(b.text[i]), b.max_mel)(rng);
    }
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-12, 12);
  b.logp.resize(static_cast<size_t>(b.batch) * b.max_text * b.max_mel);
  for (float& v : b.logp) v = ties ? small(rng) / 4.0f : normal(rng);
  const float garbage[] = {NAN, INFINITY, -INFINITY, 3e38f};
  for (int i = 0; padded && i < b.batch; ++i) {
    for (int x = 0; x < b.max_text; ++x) {
      for (int y = 0; y < b.max_mel; ++y) {
        if (x >= b.text[i] || y >= b.mel[i]) {
          b.logp[(static_cast<size_t>(i) * b.max_text + x) * b.max_mel + y] = garbage[(i + (x >= b.text[i] ? 0 : 1)) % 4];
        }
      }
    }
  }
  return b;
}

// The original Cython MAS on one item (forward over the band, backtracking with its tie
// rule), in float32 with neg_inf as the stand-in for log(0): durations per token.
std::vector<int> reference_durations(const Batch& b, int item, float neg_inf) {
  const int T = static_cast<int>(b.text[item]), S = static_cast<int>(b.mel[item]), W = S - T;
  std::vector<float> q(b.logp.begin() + static_cast<size_t>(item) * b.max_text * b.max_mel,
                       b.logp.begin() + static_cast<size_t>(item + 1) * b.max_text * b.max_mel);
  auto at = [&](int x, int y) -> float& { return q[static_cast<size_t>(x) * b.max_mel + y]; };
  for (int x = 0; x < T; ++x) {
    for (int y = x; y <= x + W; ++y) {
      const float stay = y == x ? neg_inf : at(x, y - 1);
      const float diag = x == 0 ? (y == 0 ? 0.0f : neg_inf) : at(x - 1, y - 1);
      at(x, y) = std::max(stay, diag) + at(x, y);
    }
  }
  std::vector<int> d(b.max_text, 0);
  int index = T - 1;
  for (int y = S - 1; y >= 0; --y) {
    ++d[index];
    if (index != 0 && (index == y || at(index, y - 1) < at(index - 1, y - 1))) --index;
  }
  return d;
}

struct Device {
  float* logp = nullptr;
  long long *text = nullptr, *mel = nullptr;
  int32_t* ws = nullptr;
  int* durations = nullptr;
  FastMasLayout layout{};
};

Device upload(const Batch& b, int rows_per_lane) {
  Device d;
  d.layout = kernels::fast_mas_layout(b.batch, b.max_text, b.max_mel, rows_per_lane);
  check(cudaMalloc(&d.logp, b.logp.size() * sizeof(float)), "malloc logp");
  check(cudaMemcpy(d.logp, b.logp.data(), b.logp.size() * sizeof(float), cudaMemcpyHostToDevice), "copy");
  check(cudaMalloc(&d.text, b.batch * sizeof(long long)), "malloc");
  check(cudaMalloc(&d.mel, b.batch * sizeof(long long)), "malloc");
  check(cudaMemcpy(d.text, b.text.data(), b.batch * sizeof(long long), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(d.mel, b.mel.data(), b.batch * sizeof(long long), cudaMemcpyHostToDevice), "copy");
  check(cudaMalloc(&d.ws, d.layout.total_ints * sizeof(int32_t)), "malloc ws");
  check(cudaMalloc(&d.durations, static_cast<size_t>(b.batch) * b.max_text * sizeof(int)), "malloc");
  return d;
}

void release(Device& d) {
  cudaFree(d.logp), cudaFree(d.text), cudaFree(d.mel), cudaFree(d.ws), cudaFree(d.durations);
}

constexpr float kNegInf = -1e32f;

// Whether version v runs with this K at this shape (see the file comment).
bool applies(int v, const Batch& b, const Device& d) {
  const int K = d.layout.rows_per_lane;
  if (v == 1) return K == 4 && b.max_mel % 4 == 0;
  if (v == 2 || v == 3) return K == 4 || K == 8;
  if (v != 4) return false;
  int device = 0, limit = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "attribute");
  const int64_t bytes = kernels::fast_mas_fused_smem(d.layout);
  return bytes >= 0 && bytes <= limit;
}

// The chain maximum_path_cuda_fast launches, less the path: resets, forward, walk.
void reset(const Device& d, cudaStream_t s) {
  check(cudaMemsetAsync(d.ws, 0, d.layout.zeroed_ints * sizeof(int32_t), s), "memset");
  check(cudaMemsetAsync(d.ws + d.layout.boundary_offset, 0, d.layout.boundary_ints * sizeof(int32_t), s),
        "memset");
}

// The forward pass of v1-v3 (v1 and v2 from this file, v3 production's launcher).
void forward(const Batch& b, const Device& d, int variant, cudaStream_t s) {
  const DeviceLengths text{d.text, true}, mel{d.mel, true};
  if (variant == 3) {
    return check(kernels::launch_fast_mas_forward(d.logp, b.max_text, b.max_mel, text, mel, kNegInf,
                                                  d.layout, d.ws, s),
                 "forward v3");
  }
  const bool vec4 = b.max_mel % 4 == 0;
  const int K = d.layout.rows_per_lane, smem = kernels::forward_rolled_smem(K);
  auto go = [&](auto kernel, int bytes) {
    check(kernels::launch_forward(kernel, bytes, d.logp, b.max_text, b.max_mel, text, mel, kNegInf,
                                  d.layout, d.ws, s),
          "forward");
  };
  using kernels::FencedHandover;
  using kernels::forward_rolled;
  if (variant == 1) return go(kernels::forward_v1<4, 4>, kernels::kStages * 32 * 4 * 32 * 4);
  if (K == 4) return vec4 ? go(forward_rolled<4, 4, FencedHandover<4>>, smem)
                          : go(forward_rolled<4, 1, FencedHandover<4>>, smem);
  return vec4 ? go(forward_rolled<8, 4, FencedHandover<8>>, smem) : go(forward_rolled<8, 1, FencedHandover<8>>, smem);
}
void fused(const Batch& b, const Device& d, cudaStream_t s) {
  check(kernels::launch_fast_mas_fused(d.logp, b.max_text, b.max_mel, DeviceLengths{d.text, true},
                                       DeviceLengths{d.mel, true}, kNegInf, d.layout, d.ws,
                                       d.durations, s),
        "fused");
}
void walk(const Batch& b, const Device& d, cudaStream_t s) {
  check(kernels::launch_fast_mas_walk(b.max_text, b.max_mel, DeviceLengths{d.text, true},
                                      DeviceLengths{d.mel, true}, d.layout, d.ws, d.durations, s),
        "walk");
}
// Variants 1-3: forward then walk; 4: the fused kernel.
void run(const Batch& b, const Device& d, int variant, cudaStream_t s) {
  if (variant == 4) return fused(b, d, s);
  forward(b, d, variant, s), walk(b, d, s);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds between two events around `body` over `repeats` runs (after 3
// warm-ups); `before` runs first each time, outside the events.
template <typename Before, typename Body>
float time_us(int repeats, Before before, Body body) {
  cudaEvent_t a, z;
  cudaEventCreate(&a), cudaEventCreate(&z);
  std::vector<float> us;
  for (int i = 0; i < repeats + 3; ++i) {
    before();
    cudaEventRecord(a);
    body();
    cudaEventRecord(z);
    cudaEventSynchronize(z);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, z);
    if (i >= 3) us.push_back(ms * 1000.0f);
  }
  cudaEventDestroy(a), cudaEventDestroy(z);
  return median(us);
}

#ifdef MONOFLOW_MAS_TRACE
void print_trace(const Batch& b, const Device& d) {
  using kernels::kTraceChunks;
  std::vector<long long> t(kernels::kTraceWarps * kTraceChunks);
  check(cudaMemcpyFromSymbol(t.data(), kernels::mas_trace, t.size() * sizeof(long long)),
        "trace");
  const int warps = std::min(d.layout.warps_per_item, kernels::kTraceWarps);
  for (int w = 0; w < warps; ++w) {
    std::printf("  trace item 0 warp %d (T=%lld S=%lld): cycles per chunk:", w, b.text[0], b.mel[0]);
    for (int c = 1; c < kernels::kTraceArrival && t[w * kTraceChunks + c] > t[w * kTraceChunks + c - 1]; ++c) {
      std::printf(" %lld", t[w * kTraceChunks + c] - t[w * kTraceChunks + c - 1]);
    }
    std::printf("\n");
    using kernels::kTraceArrival;
    if (t[w * kTraceChunks + kTraceArrival] != 0) {
      std::printf("  trace item 0 warp %d: cycles from chunk start to its tile's arrival:", w);
      for (int c = 0; c < kTraceArrival && t[w * kTraceChunks + kTraceArrival + c] != 0; ++c) {
        std::printf(" %lld", t[w * kTraceChunks + kTraceArrival + c] - t[w * kTraceChunks + c]);
      }
      std::printf("\n");
    }
  }
  const long long walk = t[kTraceChunks - 1] - t[kTraceChunks - 2];
  if (t[kTraceChunks - 2] != 0) std::printf("  trace item 0 walk: %lld cycles\n", walk);
  check(cudaMemset(d.ws, 0, 0), "noop");
}
#endif

std::vector<int> int_list(const std::string& value) {
  std::vector<int> out;
  std::stringstream list(value);
  for (std::string n; std::getline(list, n, ',');) out.push_back(std::stoi(n));
  return out;
}

// Runs every applicable version at one shape and K; the number of versions that differ.
int run_shape(const std::string& shape, int rows_per_lane, const std::vector<int>& variants,
              int repeats, unsigned seed, bool padded, bool ties) {
  const Batch b = make_batch(shape, seed, padded, ties);
  std::vector<std::vector<int>> expected(b.batch);
  for (int i = 0; i < b.batch; ++i) expected[i] = reference_durations(b, i, kNegInf);
  Device d = upload(b, rows_per_lane);
  cudaStream_t s = nullptr;
  std::printf("shape %s%s%s: B=%d T=%d S=%d, K=%d, %d warps per item\n", shape.c_str(),
              padded ? " padded" : "", ties ? " ties" : "", b.batch, b.max_text, b.max_mel,
              rows_per_lane, d.layout.warps_per_item);
  std::printf("%-8s %12s %12s %12s  %s\n", "variant", "forward us", "chain us", "ns/column", "durations");
  int differ = 0;
  for (const int v : variants) {
    if (!applies(v, b, d)) continue;
    check(cudaMemset(d.durations, 0xff, static_cast<size_t>(b.batch) * b.max_text * sizeof(int)), "poison");
    reset(d, s), run(b, d, v, s);
    check(cudaDeviceSynchronize(), "run");
    int flags[3];
    check(cudaMemcpy(flags, d.ws, sizeof flags, cudaMemcpyDeviceToHost), "flags");
    std::vector<int> got(static_cast<size_t>(b.batch) * b.max_text);
    check(cudaMemcpy(got.data(), d.durations, got.size() * sizeof(int), cudaMemcpyDeviceToHost), "copy back");
    int wrong = 0;
    for (int i = 0; i < b.batch; ++i) {
      wrong += !std::equal(expected[i].begin(), expected[i].end(), got.begin() + static_cast<size_t>(i) * b.max_text);
    }
    // Garbage outside the lengths is never read: a flag here is a bug like a wrong duration.
    differ += wrong != 0 || flags[0] || flags[1] || flags[2];
#ifdef MONOFLOW_MAS_TRACE
    print_trace(b, d);
    std::vector<long long> zero(kernels::kTraceWarps * kernels::kTraceChunks, 0);
    check(cudaMemcpyToSymbol(kernels::mas_trace, zero.data(), zero.size() * sizeof(long long)), "trace reset");
#endif
    float forward_us = 0, chain_us = 0;
    if (repeats > 0) {
      forward_us = time_us(repeats, [&] { reset(d, s); }, [&] { v == 4 ? fused(b, d, s) : forward(b, d, v, s); });
      chain_us = time_us(repeats, [] {}, [&] { reset(d, s), run(b, d, v, s); });
    }
    std::string verdict = wrong ? std::to_string(wrong) + " items DIFFER" : "identical to the CPU reference";
    if (flags[0] || flags[1] || flags[2]) {
      verdict += " (flags " + std::to_string(flags[0]) + " " + std::to_string(flags[1]) + " " +
                 std::to_string(flags[2]) + ")";
    }
    std::printf("v%-7d %12.1f %12.1f %12.1f  %s\n", v, forward_us, chain_us, 1000.0f * forward_us / b.max_mel,
                verdict.c_str());
  }
  release(d);
  return differ;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes = "training";
  std::vector<int> variants = {1, 2, 3, 4}, rows_per_lane = {4};
  int repeats = 50;
  unsigned seed = static_cast<unsigned>(monoflow::kSyntheticSeed);
  bool padded = false, ties = false, strict = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--padded") { padded = true; continue; }
    if (arg == "--ties") { ties = true; continue; }
    if (arg == "--check") { strict = true; continue; }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s takes a value\n", arg.c_str());
      return 1;
    }
    const std::string value = argv[++i];
    if (arg == "--shape") shapes = value;
    else if (arg == "--k") rows_per_lane = int_list(value);
    else if (arg == "--repeats") repeats = std::stoi(value);
    else if (arg == "--seed") seed = static_cast<unsigned>(std::stoul(value));
    else if (arg == "--variants") variants = int_list(value);
    else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 1;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "mas_fast_dev: no CUDA device\n");
    return 77;
  }
  int differ = 0;
  std::stringstream list(shapes);
  for (std::string shape; std::getline(list, shape, ':');) {
    for (const int k : rows_per_lane) differ += run_shape(shape, k, variants, repeats, seed, padded, ties);
  }
  if (differ) std::printf("%d version runs DIFFER from the CPU reference\n", differ);
  return strict && differ ? 1 : 0;
}
