// The warp pipeline of the split cuda-fast forward pass (a forward kernel, then the walk):
// what production's fallback (v3, mas_fast_forward.cu) and the older versions kept in
// dev/cuda/mas_fast.cu (v1, v2) share.
//
// Scheme: one warp per block and per 32*K text rows; lane l owns the K consecutive rows
// [x0 + l*K, x0 + l*K + K). A column step is, per lane, K independent max/add/compare chains
// plus one warp shuffle that hands the lane's last row (column y-1) to the next lane; lane 31
// receives the previous warp's last row instead. The warps of one utterance form a pipeline:
// warp w publishes its last row to a global boundary buffer every 32 columns and warp w+1
// reads it; how the reader knows a value is published is the version's hand-over (a
// `Handover` type, below). Blocks take a ticket when they start, so a warp only ever waits on
// a warp already running: no deadlock however the grid is scheduled. logp tiles of 32K rows
// x 32 columns stream through shared memory with cp.async, coalesced and swizzled
// (mas_fast_common.cuh), three stages deep. Only band cells count: above the diagonal Q is
// exactly neg_inf, the diagonal forces the step down, cells below the band are never read by
// band cells.
#pragma once

#include "align/kernels/mas_fast_common.cuh"

namespace monoflow::align::kernels {

constexpr int kStages = 3;  // tile stages in flight per warp

// What every forward version needs to know about its warp's share of the work.
struct WarpTask {
  int b, w, x0;
  int x;                   // this lane's first row: x0 + lane * K
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

// Before the first column: no path yet (neg_inf) and nothing non-finite seen.
template <int K>
__device__ __forceinline__ void start_rows(float (&q)[K], float (&check)[K], float neg_inf) {
#pragma unroll
  for (int j = 0; j < K; ++j) q[j] = neg_inf, check[j] = 0.0f;
}

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
  t.x = t.x0 + lane * K;
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

// The first warp's virtual row -1 as f[k] = Q[-1][y0-4+k], k < 36: Q[-1][-1] = 0 starts the
// path, everything else neg_inf.
__device__ __forceinline__ void virtual_boundary(float (&f)[36], int y0, float neg_inf) {
#pragma unroll
  for (int k = 0; k < 36; ++k) f[k] = (k == 3 && y0 == 0) ? 0.0f : neg_inf;
}

// Lane 31: up_s[k] = Q[x0-1][y0-1+k] for the chunk at y0, from f (f[c+3] is column y0+c).
__device__ __forceinline__ void stage_boundary(float* up_s, const float (&f)[36]) {
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    reinterpret_cast<float4*>(up_s)[m] = make_float4(f[4 * m + 3], f[4 * m + 4], f[4 * m + 5], f[4 * m + 6]);
  }
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

// Issues the copies of chunk c's logp tile into its stage (none past the last chunk) and
// commits them as one group.
template <int K, int VEC>
__device__ __forceinline__ void issue_tile(float* tiles, const WarpTask& t, int max_mel, int c, int lane) {
  if (c < t.chunks) {
    load_tile<K, VEC>(tiles + (c % kStages) * (32 * K * 32), t.item, max_mel, t.x0, t.y_first + 32 * c,
                      t.text_len, t.mel_len, lane);
  }
  cp_async_commit();
}

// Waits for chunk i's tile (the newer groups stay in flight) and returns its stage.
template <int K>
__device__ __forceinline__ const float* await_tile(const float* tiles, int i) {
  cp_async_wait<kStages - 1>();
  __syncwarp();
  return tiles + (i % kStages) * (32 * K * 32);
}

// A chunk wholly inside the band, below the warp's diagonal (no per-cell masking needed).
template <int K>
__device__ __forceinline__ bool inner_chunk(const WarpTask& t, int y0) {
  return y0 >= t.x0 + 32 * K && y0 + 31 <= t.band_width + t.x0;
}

// The lane's K decision words of the chunk at y0.
template <int K>
__device__ __forceinline__ void store_bits(const WarpTask& t, int y0, int padded_text, const uint32_t (&word)[K]) {
  uint32_t* dst = t.bits + static_cast<int64_t>(y0 >> 5) * padded_text;
#pragma unroll
  for (int j = 0; j < K; j += 4) {
    *reinterpret_cast<uint4*>(dst + j) = make_uint4(word[j], word[j + 1], word[j + 2], word[j + 3]);
  }
}

// Flags the item when a non-finite value inside the band reached this lane's checks.
template <int K>
__device__ __forceinline__ void report_non_finite(const float (&check)[K], int32_t* ws, int batch, int b) {
  float bad = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) bad += check[j];
  if (bad != 0.0f) atomicMax(&ws[1], batch - b);
}

// A 32-column chunk as a rolled loop over 8 groups of 4 columns, the boundary values of the
// chunk in shared memory (up_s[j] = Q[x0-1][y0-1+j]); lane 31 hands each group's last-row
// values to `h.publish_group` when a next warp reads them.
template <int K, bool MASKED, class Handover>
__device__ __forceinline__ void chunk_rolled(const float* tile, const float* up_s, float (&q)[K],
                                             uint32_t (&word)[K], float (&check)[K], int lane, int x,
                                             int y0, const WarpTask& t, float neg_inf, Handover& h) {
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
    if (lane == 31 && t.publishes) h.publish_group(t, y0 + 4 * g, out);
  }
}

// The forward kernel around chunk_rolled. `Handover` is lane 31's side of the hand-over
// between warps (each call made by lane 31 only):
//   prefetch(t, y0, neg_inf)   starts fetching the boundary values of the chunk at y0 (the
//                              first warp: its virtual row), before the chunk before it runs;
//   stage(up_s, t, y0)         writes them to shared memory once they are there;
//   publish_group(t, y, out)   publishes this warp's last row at columns y .. y+3;
//   publish_chunk(t, y0, K)    marks the chunk at y0 published.
template <int K, int VEC, class Handover>
__global__ void __launch_bounds__(32) forward_rolled(const float* __restrict__ logp, int max_text,
                                                     int max_mel, DeviceLengths text_lengths,
                                                     DeviceLengths mel_lengths, float neg_inf,
                                                     FastMasLayout layout, int32_t* ws) {
  extern __shared__ __align__(16) float tiles[];
  constexpr int kTile = 32 * K * 32;
  float* up_s = tiles + kStages * kTile;  // [2][32]: boundary values of this and the next chunk
  const int lane = threadIdx.x;
  WarpTask t;
  if (!take_task<K>(t, logp, max_text, max_mel, text_lengths, mel_lengths, layout, ws, lane)) return;
  float q[K], check[K];
  start_rows<K>(q, check, neg_inf);
  Handover h;
  if (lane == 31) {
    h.prefetch(t, t.y_first, neg_inf);
    h.stage(up_s, t, t.y_first);
  }

#pragma unroll 1
  for (int s = 0; s < kStages - 1; ++s) issue_tile<K, VEC>(tiles, t, max_mel, s, lane);
#pragma unroll 1
  for (int i = 0; i < t.chunks; ++i) {
    MONOFLOW_TRACE(t.b, t.w, i, lane)
    const int y0 = t.y_first + 32 * i;
    issue_tile<K, VEC>(tiles, t, max_mel, i + kStages - 1, lane);
    const bool more = i + 1 < t.chunks;
    if (more && lane == 31) h.prefetch(t, y0 + 32, neg_inf);  // in flight during this chunk
    const float* tile = await_tile<K>(tiles, i);
    uint32_t word[K] = {};
    const float* ups = up_s + (i & 1) * 32;
    if (inner_chunk<K>(t, y0)) {
      chunk_rolled<K, false>(tile, ups, q, word, check, lane, t.x, y0, t, neg_inf, h);
    } else {
      chunk_rolled<K, true>(tile, ups, q, word, check, lane, t.x, y0, t, neg_inf, h);
    }
    store_bits<K>(t, y0, layout.padded_text, word);
    if (lane == 31) {
      if (t.publishes) h.publish_chunk(t, y0, K);
      if (more) h.stage(up_s + ((i + 1) & 1) * 32, t, y0 + 32);
    }
    __syncwarp();  // the tile stage is refilled next iteration
  }
  report_non_finite<K>(check, ws, layout.batch, t.b);
}

// Shared memory of forward_rolled: the tile stages and two chunks' boundary values.
inline int forward_rolled_smem(int rows_per_lane) {
  return kStages * 32 * rows_per_lane * 32 * static_cast<int>(sizeof(float)) +
         2 * 32 * static_cast<int>(sizeof(float));
}

// One block of one warp per (item, 32K rows).
template <typename Kernel>
cudaError_t launch_forward(Kernel kernel, int smem, const float* logp, int max_text, int max_mel,
                           DeviceLengths text_lengths, DeviceLengths mel_lengths, float neg_inf,
                           const FastMasLayout& layout, int32_t* workspace, cudaStream_t stream) {
  // Above 48 KB a kernel must opt in; cheap enough to repeat on every launch.
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  kernel<<<layout.batch * layout.warps_per_item, 32, smem, stream>>>(
      logp, max_text, max_mel, text_lengths, mel_lengths, neg_inf, layout, workspace);
  return cudaGetLastError();
}

}  // namespace monoflow::align::kernels
