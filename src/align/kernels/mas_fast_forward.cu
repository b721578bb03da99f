// `cuda-fast` forward pass: one decision bit per cell instead of rewritten float scores;
// logp is only read.
//
// Scheme (both versions): one warp per block and per 32*K text rows; lane l owns the K
// consecutive rows [x0 + l*K, x0 + l*K + K). A column step is, per lane, K independent
// max/add/compare chains plus one warp shuffle that hands the lane's last row (column y-1)
// to the next lane; lane 31 receives the previous warp's last row instead. The warps of one
// utterance form a pipeline: warp w publishes its last row to a global boundary buffer every
// 32 columns and warp w+1 reads it, ordered by an acquire/release progress counter. Blocks
// take a ticket when they start, so a warp only ever waits on a warp already running: no
// deadlock however the grid is scheduled. logp tiles of 32K rows x 32 columns stream through
// shared memory with cp.async, coalesced and swizzled (mas_fast_common.cuh), three stages
// deep. Only band cells count: above the diagonal Q is exactly neg_inf, the diagonal forces
// the step down, cells below the band are never read by band cells.
//
// Versions, side by side (bench_mas on an H100, 2026-11-22, docs/benchmarks.md "MAS"; times
// with the dense float32 path, B=32 T=2048 S=8192 / training batch B=32 T<=175 S<=1000):
//   v1 forward_v1: the 32-column chunk fully unrolled (compile-time register indices for the
//      boundary values and bit positions). 2.32 / 0.145 ms (K=4). K=4, VEC=4 only; the default
//      there, as the fastest measured.
//   v2 forward_v2<.., TAGGED=false>: the chunk as a rolled loop over 8 groups of 4 columns;
//      lane 31's boundary values through shared memory; hand-over by st.release/ld.acquire
//      on a progress counter per 32 columns. 2.31 / 0.160 ms (K=4), 2.50 / 0.205 ms (K=8):
//      small code did not help, so the instruction cache is not what limits a column step
//      (~150 ns with many warps per utterance, about half with one). The default where v1
//      does not apply (K=8, or rows not 16-byte aligned).
//   v3 forward_v2<.., TAGGED=true>: v2 with a fence-free hand-over: each published value
//      carries its column in the upper half of a 64-bit entry (one single-copy-atomic
//      access), so the writer needs no GPU-scope MEMBAR per chunk (which also waits for its
//      in-flight tile loads). First GPU run hung: the polling loads were plain and got hoisted;
//      now volatile and bounded. 1.88 / 0.153 ms (K=4): the fence was a real part of the
//      column step at long T; the default from T >= 512.
//   v4 (mas_fast_fused.cu): forward and walk fused in one block per utterance; the default
//      wherever its block fits in shared memory (mas_cuda.cpp tries it first): training batch
//      0.089 ms. These kernels serve the longer utterances.
// Rows per lane: K=4 gives twice the warps of K=8 and a column step half as long; K=4 was
// faster at every measured point. VEC=4: 16-byte copies (S % 4 == 0); VEC=1: 4-byte fallback.
#include "align/kernels/mas_fast_common.cuh"

namespace monoflow::align::kernels {

FastMasLayout fast_mas_layout(int batch, int max_text, int max_mel, int rows_per_lane) {
  auto align64 = [](int64_t n) { return (n + 63) / 64 * 64; };
  FastMasLayout l;
  l.batch = batch;
  l.rows_per_lane = rows_per_lane;
  l.warps_per_item = (max_text + 32 * rows_per_lane - 1) / (32 * rows_per_lane);
  l.padded_text = l.warps_per_item * 32 * rows_per_lane;
  l.mel_blocks = (max_mel + 31) / 32;
  l.boundary_stride = l.mel_blocks * 32 + 64;  // room for the last chunk's 36-float reads
  l.zeroed_ints = 4 + static_cast<int64_t>(batch) * l.warps_per_item;
  l.starts_offset = align64(l.zeroed_ints);
  l.bits_offset = l.starts_offset + align64(static_cast<int64_t>(batch) * max_text);
  l.boundary_offset =
      l.bits_offset + align64(static_cast<int64_t>(batch) * l.mel_blocks * l.padded_text);
  // 64-bit entries (v3's tagged values; v1/v2 use the first half as floats).
  l.boundary_ints = align64(2 * static_cast<int64_t>(batch) * l.warps_per_item * l.boundary_stride);
  l.total_ints = l.boundary_offset + l.boundary_ints;
  return l;
}

namespace {

constexpr int kStages = 3;

// What every forward version needs to know about its warp's share of the work.
struct WarpTask {
  int b, w, x0;
  int text_len, band_width;
  int y_first, chunks;
  int up_last;             // last column the previous warp publishes
  bool publishes;          // a next warp exists and reads this warp's last row
  const float* item;       // logp of item b
  const float* up_row;     // previous warp's published last row
  float* my_row;           // this warp's published last row
  int* progress;           // progress[w]: columns < progress[w] are published
  uint32_t* bits;          // this lane's rows in the 32-column block 0
  int mel_len;
  int* stalled;            // set when a hand-over wait gives up (a bug, never a user error)
  bool gave_up;            // this warp gave up once: it waits no more (error reported anyway)
};

// Bound on hand-over polls (each an L2 round trip, about a microsecond): a wait this long
// means a bug; giving up turns a hang into an error the host reports.
constexpr int kMaxPolls = 1 << 20;

// Takes a ticket and maps it to (item, warp); false when the warp has no rows to do.
template <int K>
__device__ __forceinline__ bool take_task(WarpTask& t, const float* logp, int max_text,
                                          int max_mel, DeviceLengths text_lengths,
                                          DeviceLengths mel_lengths,
                                          const FastMasLayout& layout, int32_t* ws, int lane) {
  int* flags = ws;
  int ticket = 0;
  if (lane == 0) ticket = atomicAdd(ws + 3, 1);
  ticket = __shfl_sync(kFullMask, ticket, 0);
  const int W = layout.warps_per_item;
  t.b = ticket / W, t.w = ticket % W;
  t.text_len = length_at(text_lengths, t.b);
  t.mel_len = length_at(mel_lengths, t.b);
  if (!lengths_valid(t.text_len, t.mel_len, max_text, max_mel)) {
    if (lane == 0 && t.w == 0) atomicMax(&flags[0], layout.batch - t.b);
    return false;
  }
  t.x0 = t.w * 32 * K;
  if (t.x0 >= t.text_len) return false;
  t.band_width = t.mel_len - t.text_len;
  const int last_row = min(t.x0 + 32 * K, t.text_len) - 1;
  t.y_first = t.x0;
  t.chunks = (t.band_width + last_row - t.y_first + 32) / 32;
  t.up_last = t.band_width + t.x0 - 1;
  t.publishes = t.w + 1 < W && t.x0 + 32 * K < t.text_len;
  t.item = logp + static_cast<int64_t>(t.b) * max_text * max_mel;
  float* boundary = reinterpret_cast<float*>(ws + layout.boundary_offset);
  const int64_t row_floats = 2 * static_cast<int64_t>(layout.boundary_stride);  // 64-bit entries
  t.up_row = boundary + (t.b * W + t.w - 1) * row_floats;
  t.my_row = boundary + (t.b * W + t.w) * row_floats;
  t.progress = ws + 4 + t.b * W;
  t.stalled = ws + 2;
  t.gave_up = false;
  t.bits = reinterpret_cast<uint32_t*>(ws + layout.bits_offset) +
           static_cast<int64_t>(t.b) * layout.mel_blocks * layout.padded_text + t.x0 + lane * K;
  return true;
}

// Lane 31: waits until the previous warp has published what the chunk at y0 needs, then
// loads f[k] = Q[x0-1][y0-4+k], k < 36 (so f[c+3] is the value for column y0+c).
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

// The first warp's virtual row -1: Q[-1][-1] = 0 starts the path, everything else neg_inf.
__device__ __forceinline__ void virtual_boundary(float (&f)[36], int y0, float neg_inf) {
#pragma unroll
  for (int k = 0; k < 36; ++k) f[k] = (k == 3 && y0 == 0) ? 0.0f : neg_inf;
}

// One column step for this lane's K rows (see the file comment). `mask` is the bit of
// column y in the 32-column word, `x` this lane's first row (MASKED only).
template <int K, bool MASKED>
__device__ __forceinline__ void column_step(float (&q)[K], float (&check)[K], uint32_t (&word)[K],
                                            const float (&val)[K], float from_above,
                                            uint32_t mask, int x, int y, int band_width,
                                            int text_len, float neg_inf) {
#pragma unroll
  for (int j = K - 1; j >= 0; --j) {  // last row first: q[j-1] still holds column y-1
    const float stay = q[j];
    const float diag = j ? q[j - 1] : from_above;
    bool down = diag > stay;
    float next = fmaxf(stay, diag) + val[j];
    if constexpr (MASKED) {
      const int row = x + j;
      if (y < row) next = neg_inf;
      down = down || y == row;
      if (y >= row && y - row <= band_width && row < text_len) check[j] = fmaf(val[j], 0.0f, check[j]);
    } else {
      check[j] = fmaf(val[j], 0.0f, check[j]);  // stays 0 unless val is inf or nan
    }
    q[j] = next;
    if (down) word[j] |= mask;
  }
}

// ---------------------------------------------------------------------------------------
// v1: the whole 32-column chunk unrolled (kept for comparison; K=4, VEC=4 only).
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
  const int x = t.x0 + lane * K;
  float q[K], check[K];
#pragma unroll
  for (int j = 0; j < K; ++j) q[j] = neg_inf, check[j] = 0.0f;
  float up[36], up_next[36], out[32];
  if (t.w == 0) virtual_boundary(up, t.y_first, neg_inf);
  else if (lane == 31) fetch_boundary(up, t, t.y_first);

  constexpr int kTile = 32 * K * 32;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < t.chunks) load_tile<K, VEC>(tiles + s * kTile, t.item, max_mel, t.x0, t.y_first + 32 * s,
                                        t.text_len, t.mel_len, lane);
    cp_async_commit();
  }
  for (int i = 0; i < t.chunks; ++i) {
    MONOFLOW_TRACE(t.b, t.w, i, lane)
    const int y0 = t.y_first + 32 * i;
    if (i + kStages - 1 < t.chunks) {
      load_tile<K, VEC>(tiles + ((i + kStages - 1) % kStages) * kTile, t.item, max_mel, t.x0,
                        y0 + 32 * (kStages - 1), t.text_len, t.mel_len, lane);
    }
    cp_async_commit();
    if (i + 1 < t.chunks) {
      if (t.w == 0) virtual_boundary(up_next, y0 + 32, neg_inf);
      else if (lane == 31) fetch_boundary(up_next, t, y0 + 32);
    }
    cp_async_wait<kStages - 1>();
    __syncwarp();
    uint32_t word[K];
#pragma unroll
    for (int j = 0; j < K; ++j) word[j] = 0;
    const float* tile = tiles + (i % kStages) * kTile;
    if (y0 >= t.x0 + 32 * K && y0 + 31 <= t.band_width + t.x0) {
      chunk_v1<K, false>(tile, q, up, out, word, check, lane, x, y0, t.band_width, t.text_len, neg_inf);
    } else {
      chunk_v1<K, true>(tile, q, up, out, word, check, lane, x, y0, t.band_width, t.text_len, neg_inf);
    }
    __syncwarp();  // the stage is refilled next iteration
    uint32_t* dst = t.bits + static_cast<int64_t>(y0 >> 5) * layout.padded_text;
#pragma unroll
    for (int j = 0; j < K; j += 4) {
      *reinterpret_cast<uint4*>(dst + j) = make_uint4(word[j], word[j + 1], word[j + 2], word[j + 3]);
    }
    if (lane == 31 && t.publishes) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        __stcg(reinterpret_cast<float4*>(t.my_row + y0) + k,
               make_float4(out[4 * k], out[4 * k + 1], out[4 * k + 2], out[4 * k + 3]));
      }
      store_release(t.progress + t.w, min(y0 + 32, t.band_width + t.x0 + 32 * K));
    }
#pragma unroll
    for (int k = 0; k < 36; ++k) up[k] = up_next[k];
  }
  float bad = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) bad += check[j];
  if (bad != 0.0f) atomicMax(&ws[1], layout.batch - t.b);
}

// ---------------------------------------------------------------------------------------
// v2: rolled loop over groups of 4 columns; boundary values through shared memory.
// Tagged boundary entry: the value's bits with (column + 1) above them, written and read as
// one 64-bit access, so that a reader can tell a published value from an old one without
// any fence (the buffer is zeroed before the run).
__device__ __forceinline__ unsigned long long tagged(float value, int column) {
  return (static_cast<unsigned long long>(column + 1) << 32) | __float_as_uint(value);
}

template <int K, bool MASKED, bool TAGGED>
__device__ __forceinline__ void chunk_v2(const float* tile, const float* up_s, float (&q)[K],
                                         uint32_t (&word)[K], float (&check)[K], int lane, int x,
                                         int y0, const WarpTask& t, float neg_inf) {
#pragma unroll 1
  for (int g = 0; g < 8; ++g) {
    const float4 up = *reinterpret_cast<const float4*>(up_s + 4 * g);
    float4 v[K];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      v[j] = *reinterpret_cast<const float4*>(tile + (lane * K + j) * 32 + (((g ^ lane) & 7) << 2));
    }
    float4 out;
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      const float send = (lane == 31) ? component(up, cc) : q[K - 1];
      const float from_above = __shfl_sync(kFullMask, send, (lane + 31) & 31);
      float val[K];
#pragma unroll
      for (int j = 0; j < K; ++j) val[j] = component(v[j], cc);
      column_step<K, MASKED>(q, check, word, val, from_above, 1u << (4 * g + cc), x,
                             y0 + 4 * g + cc, t.band_width, t.text_len, neg_inf);
      (cc == 0 ? out.x : cc == 1 ? out.y : cc == 2 ? out.z : out.w) = q[K - 1];
    }
    if (lane == 31 && t.publishes) {
      if constexpr (TAGGED) {
        auto* dst = reinterpret_cast<ulonglong2*>(t.my_row) + (y0 + 4 * g) / 2;
        const int y = y0 + 4 * g;
        asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};\n" ::"l"(dst),
                     "l"(tagged(out.x, y)), "l"(tagged(out.y, y + 1)) : "memory");
        asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};\n" ::"l"(dst + 1),
                     "l"(tagged(out.z, y + 2)), "l"(tagged(out.w, y + 3)) : "memory");
      } else {
        __stcg(reinterpret_cast<float4*>(t.my_row + y0) + g, out);
      }
    }
  }
}

// v3's reader (lane 31): the tagged entries of columns y0-2 .. y0+31 of the previous warp's
// last row, loaded at the start of a chunk and checked at its end.
struct TaggedBoundary {
  ulonglong2 e[17];
};
__device__ __forceinline__ void load_tagged(TaggedBoundary& tb, const WarpTask& t, int y0) {
  const auto* src = reinterpret_cast<const ulonglong2*>(t.up_row) + (y0 - 2) / 2;
#pragma unroll
  for (int k = 0; k < 17; ++k) {  // volatile: a polling loop must not reuse earlier loads
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];\n"
                 : "=l"(tb.e[k].x), "=l"(tb.e[k].y) : "l"(src + k) : "memory");
  }
}
// True when every needed entry (columns y0-1 .. min(y0+30, up_last)) carries its tag.
__device__ __forceinline__ bool tagged_ready(const TaggedBoundary& tb, const WarpTask& t, int y0) {
  bool ok = true;
#pragma unroll
  for (int k = 0; k < 17; ++k) {
    const int c0 = y0 - 2 + 2 * k;
    if (k > 0 && c0 <= t.up_last) ok = ok && (tb.e[k].x >> 32) == static_cast<unsigned>(c0 + 1);
    if (k < 16 && c0 + 1 <= t.up_last) ok = ok && (tb.e[k].y >> 32) == static_cast<unsigned>(c0 + 2);
  }
  return ok;
}
// Reloads until every needed entry carries its tag, or gives up (see kMaxPolls).
__device__ __forceinline__ void wait_tagged(TaggedBoundary& tb, WarpTask& t, int y0) {
  for (int polls = 0; !t.gave_up && !tagged_ready(tb, t, y0); ++polls) {
    if (polls == kMaxPolls) {
      atomicExch(t.stalled, 1);
      t.gave_up = true;
      return;
    }
    load_tagged(tb, t, y0);
  }
}

// up_s[j] = Q[x0-1][y0-1+j]: entry j+1 of the loaded run.
__device__ __forceinline__ void stage_tagged(float* up_s, const TaggedBoundary& tb) {
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    // entries 4m+1 .. 4m+4: e[2m].y, e[2m+1].x, e[2m+1].y, e[2m+2].x
    reinterpret_cast<float4*>(up_s)[m] =
        make_float4(__uint_as_float(static_cast<unsigned>(tb.e[2 * m].y)),
                    __uint_as_float(static_cast<unsigned>(tb.e[2 * m + 1].x)),
                    __uint_as_float(static_cast<unsigned>(tb.e[2 * m + 1].y)),
                    __uint_as_float(static_cast<unsigned>(tb.e[2 * m + 2].x)));
  }
}

// Lane 31: up_s[k] = Q[x0-1][y0-1+k] for the chunk at y0, from f (see fetch_boundary).
__device__ __forceinline__ void stage_boundary(float* up_s, const float (&f)[36]) {
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    reinterpret_cast<float4*>(up_s)[m] = make_float4(f[4 * m + 3], f[4 * m + 4], f[4 * m + 5], f[4 * m + 6]);
  }
}

template <int K, int VEC, bool TAGGED>
__global__ void __launch_bounds__(32) forward_v2(const float* __restrict__ logp, int max_text,
                                                 int max_mel, DeviceLengths text_lengths,
                                                 DeviceLengths mel_lengths, float neg_inf,
                                                 FastMasLayout layout, int32_t* ws) {
  extern __shared__ __align__(16) float tiles[];
  constexpr int kTile = 32 * K * 32;
  float* up_s = tiles + kStages * kTile;  // [2][32]: boundary values of this and the next chunk
  const int lane = threadIdx.x;
  WarpTask t;
  if (!take_task<K>(t, logp, max_text, max_mel, text_lengths, mel_lengths, layout, ws, lane)) return;
  const int x = t.x0 + lane * K;
  float q[K], check[K];
#pragma unroll
  for (int j = 0; j < K; ++j) q[j] = neg_inf, check[j] = 0.0f;
  float f[36];
  TaggedBoundary tb;
  if (lane == 31) {
    if (t.w == 0) {
      virtual_boundary(f, t.y_first, neg_inf);
      stage_boundary(up_s, f);
    } else if constexpr (TAGGED) {
      load_tagged(tb, t, t.y_first);
      wait_tagged(tb, t, t.y_first);
      stage_tagged(up_s, tb);
    } else {
      fetch_boundary(f, t, t.y_first);
      stage_boundary(up_s, f);
    }
  }

#pragma unroll 1
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < t.chunks) load_tile<K, VEC>(tiles + s * kTile, t.item, max_mel, t.x0, t.y_first + 32 * s,
                                        t.text_len, t.mel_len, lane);
    cp_async_commit();
  }
#pragma unroll 1
  for (int i = 0; i < t.chunks; ++i) {
    MONOFLOW_TRACE(t.b, t.w, i, lane)
    const int y0 = t.y_first + 32 * i;
    if (i + kStages - 1 < t.chunks) {
      load_tile<K, VEC>(tiles + ((i + kStages - 1) % kStages) * kTile, t.item, max_mel, t.x0,
                        y0 + 32 * (kStages - 1), t.text_len, t.mel_len, lane);
    }
    cp_async_commit();
    const bool more = i + 1 < t.chunks;
    if (more && lane == 31) {  // loads in flight during this chunk, staged after it
      if (t.w == 0) virtual_boundary(f, y0 + 32, neg_inf);
      else if constexpr (TAGGED) load_tagged(tb, t, y0 + 32);
      else fetch_boundary(f, t, y0 + 32);
    }
    cp_async_wait<kStages - 1>();
    __syncwarp();
    uint32_t word[K];
#pragma unroll
    for (int j = 0; j < K; ++j) word[j] = 0;
    const float* tile = tiles + (i % kStages) * kTile;
    const float* ups = up_s + (i & 1) * 32;
    if (y0 >= t.x0 + 32 * K && y0 + 31 <= t.band_width + t.x0) {
      chunk_v2<K, false, TAGGED>(tile, ups, q, word, check, lane, x, y0, t, neg_inf);
    } else {
      chunk_v2<K, true, TAGGED>(tile, ups, q, word, check, lane, x, y0, t, neg_inf);
    }
    uint32_t* dst = t.bits + static_cast<int64_t>(y0 >> 5) * layout.padded_text;
#pragma unroll
    for (int j = 0; j < K; j += 4) {
      *reinterpret_cast<uint4*>(dst + j) = make_uint4(word[j], word[j + 1], word[j + 2], word[j + 3]);
    }
    if (lane == 31) {
      if (!TAGGED && t.publishes) {
        store_release(t.progress + t.w, min(y0 + 32, t.band_width + t.x0 + 32 * K));
      }
      if (more) {
        float* next = up_s + ((i + 1) & 1) * 32;
        if (!TAGGED || t.w == 0) {
          stage_boundary(next, f);
        } else {
          wait_tagged(tb, t, y0 + 32);
          stage_tagged(next, tb);
        }
      }
    }
    __syncwarp();  // the tile stage is refilled next iteration
  }
  float bad = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) bad += check[j];
  if (bad != 0.0f) atomicMax(&ws[1], layout.batch - t.b);
}

template <typename Kernel>
cudaError_t launch(Kernel kernel, int smem, const float* logp, int max_text, int max_mel,
                   DeviceLengths text_lengths, DeviceLengths mel_lengths, float neg_inf,
                   const FastMasLayout& layout, int32_t* workspace, cudaStream_t stream) {
  // Above 48 KB a kernel must opt in; cheap enough to repeat on every launch.
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  kernel<<<layout.batch * layout.warps_per_item, 32, smem, stream>>>(
      logp, max_text, max_mel, text_lengths, mel_lengths, neg_inf, layout, workspace);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fast_mas_forward(const float* logp, int max_text, int max_mel,
                                    DeviceLengths text_lengths, DeviceLengths mel_lengths,
                                    float neg_inf, const FastMasLayout& layout, int32_t* workspace,
                                    int variant, cudaStream_t stream) {
  if (layout.batch == 0) return cudaSuccess;
  const bool vec4 = max_mel % 4 == 0 && reinterpret_cast<uintptr_t>(logp) % 16 == 0;
  const int K = layout.rows_per_lane;
  const int tile_bytes = 32 * K * 32 * static_cast<int>(sizeof(float));
  const int smem_v2 = kStages * tile_bytes + 2 * 32 * static_cast<int>(sizeof(float));
#define MONOFLOW_LAUNCH(kernel, smem) \
  return launch(kernel, smem, logp, max_text, max_mel, text_lengths, mel_lengths, neg_inf, layout, workspace, stream)
  // Default (0): the fastest measured version that applies (H100, 2026-11-22): v3 from 512
  // text rows on (B=32 T=2048: 1.88 vs 2.25 ms for v1; T=512: 0.34 vs 0.37), v1 below that for
  // K=4 with 16-byte rows (training batch 0.146 vs 0.153 ms for v3), else v2.
  if (variant == 0 && max_text >= 512) variant = 3;
  if (variant == 1 || (variant == 0 && K == 4 && vec4)) {
    if (K != 4 || !vec4) return cudaErrorInvalidValue;  // v1 is kept in its measured configuration
    MONOFLOW_LAUNCH((forward_v1<4, 4>), kStages * tile_bytes);
  }
  if (variant == 0 || variant == 2) {
    if (K == 4) {
      if (vec4) MONOFLOW_LAUNCH((forward_v2<4, 4, false>), smem_v2);
      MONOFLOW_LAUNCH((forward_v2<4, 1, false>), smem_v2);
    }
    if (K == 8) {
      if (vec4) MONOFLOW_LAUNCH((forward_v2<8, 4, false>), smem_v2);
      MONOFLOW_LAUNCH((forward_v2<8, 1, false>), smem_v2);
    }
  }
  if (variant == 3) {
    if (K == 4) {
      if (vec4) MONOFLOW_LAUNCH((forward_v2<4, 4, true>), smem_v2);
      MONOFLOW_LAUNCH((forward_v2<4, 1, true>), smem_v2);
    }
    if (K == 8) {
      if (vec4) MONOFLOW_LAUNCH((forward_v2<8, 4, true>), smem_v2);
      MONOFLOW_LAUNCH((forward_v2<8, 1, true>), smem_v2);
    }
  }
#undef MONOFLOW_LAUNCH
  return cudaErrorInvalidValue;
}

}  // namespace monoflow::align::kernels
