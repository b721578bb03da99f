// `cuda-fast` v4: forward pass and walk fused, one thread block per utterance.
//
// What v4 changes against the split kernels (the warp pipeline of mas_fast_pipeline.cuh: v3 in
// mas_fast_forward.cu, v1 and v2 in dev/cuda/mas_fast.cu), each from an ncu profile of v1 at
// the training batch (docs/history/benchmarks-2026-11.md, "cuda-fast v4: the whole search in one block per
// utterance", has the profile's figures):
// - The W warps of an utterance form one block and hand their last rows over through shared
//   memory, ordered by CTA-scope release/acquire. v1-v3 used global memory with GPU-scope
//   acquire loads (each an L1 invalidation, CCTL.IVALL) and a fence per published chunk
//   (ERRBAR), a large share of the samples.
// - Tile loads: a precomputed source pointer per lane and only rows inside the text length,
//   about 4 instructions per 16-byte copy. v1's per-copy length tests were the largest share
//   of all instructions executed.
// - The column step has no per-cell branches or index tests outside the band's edges:
//   logp cells outside the band are replaced by 0 in the edge chunks, which keeps the
//   scores above the diagonal exactly neg_inf (neg_inf + 0 and max(neg_inf, neg_inf)), so the
//   diagonal needs no special case; the walk steps down at the diagonal itself, as the
//   original backtracking does. Decisions shift into a 32-bit word (one bit per column) with
//   no per-column bit position, so the 32-column chunk is a rolled loop of 4-column groups.
// - Decision bits stay in shared memory and the block's first warp walks them right after
//   the forward pass: no second launch, no global round trip of the bits.
// Applies when the block's shared memory fits (fast_mas_fused_smem); otherwise v3
// (mas_fast_forward.cu) and the walk run.
// Tried and dropped (dev/cuda/mas_fast.cu, training batch, K=2; the timings are in the same
// section of docs/history/benchmarks-2026-11.md):
// - One bulk copy (TMA, cp.async.bulk) per 128-byte tile row instead of 16-byte cp.async: a
//   tile then arrived well after its chunk had started (the copy engine handles such small
//   copies slowly); the forward pass got slower.
// - The next tile's cp.async spread over the chunk's column groups instead of one burst
//   (each copy stalls the warp's issue either way): the chunk grew.
// - A walk that loads the three words a next step can need ahead of time: no faster; the walk
//   is bound by its memory instructions' issue from one thread, so the kept walk has one load
//   and one store per step.
//
// Why the hand-over is race-free. Warps of one block share four things in shared memory:
// - Tiles: each warp's own stages; cp.async.wait_group and __syncwarp order a stage's copy
//   before its reads, and the __syncwarp that ends a chunk orders its reads before the copy
//   that refills it two chunks later.
// - Decision bits: each warp writes only its own rows' words; the walk reads them after
//   __syncthreads.
// - Boundary rows: row w + 1 is written only by warp w's lane 31 and read only by warp w + 1
//   (and row 0, the virtual row above warp 0, only before the first __syncthreads). Each
//   column is written once (a warp's chunks cover disjoint 32-column ranges), so there is
//   no write-after-read hazard, and a read must only come after the write of its column:
//   1. lane 31 writes columns [y0, y0 + 32) of its row, then stores y0 + 32 to progress[w]
//      with st.release.cta: the release orders the thread's earlier writes before it;
//   2. lane 0 of warp w + 1 spins on ld.acquire.cta of progress[w] until it reaches `need`,
//      which covers every column the chunk reads (y0 - 1 .. y0 + 31; counters are multiples
//      of 32, and they only grow); an acquire that reads a released value synchronises
//      with that release (PTX memory model, CTA scope, both threads in one block);
//   3. __syncwarp orders lane 0's acquire before the other lanes' reads of the row (it
//      orders memory among the threads that take part in it).
//   So every read of a boundary column happens after the write it needs. Columns past the
//   producer's last band column (up_last) feed only cells right of the band, whose bits the
//   walk never reads; they hold values of the producer's last chunk, ordered too (`need` is
//   capped at up_last + 1, which only the producer's final release reaches), or, past that
//   chunk, whatever the shared memory held: read, never written, so no race either.
// - Progress counters: written by one lane each, read with acquire; a wait that gives up
//   after 2^22 polls sets the timeout flag instead of hanging, and the call reports it.
// compute-sanitizer's racecheck follows barriers, not release/acquire pairs, so it reports
// the boundary-row accesses and the counters as hazards. tests/align/test_mas_handover.cpp
// checks the argument under thousands of launches with random sleeps at each point above
// (the Jitter hook below), and checks that the same stress catches a release placed before
// the writes; docs/reliability.md records what racecheck reports.
#include "align/kernels/mas_fast_common.cuh"

namespace monoflow::align::kernels {
namespace {

constexpr int kFusedStages = 3;  // tile stages in flight per warp
constexpr int kMaxFusedWarps = 8;

struct FusedSmem {
  int row_len;          // floats per boundary row
  int64_t brow_offset;  // floats: W boundary rows (row w: what warp w reads, column y at y)
  int64_t bits_offset;  // uint32 [mel_blocks][padded_text]
  int64_t walk_offset;  // int2 [padded_text]: (frames, first frame) per token from the walk
  int64_t tile_offset;  // floats: [W][kFusedStages][32K x 32]
  int64_t bytes;
};

__host__ __device__ inline FusedSmem fused_smem(const FastMasLayout& l) {
  FusedSmem s;
  const int K = l.rows_per_lane, W = l.warps_per_item;
  s.row_len = (l.mel_blocks + 2) * 32;
  s.brow_offset = kMaxFusedWarps;  // after the progress counters (ints)
  s.bits_offset = s.brow_offset + static_cast<int64_t>(W) * s.row_len;
  s.walk_offset = (s.bits_offset + static_cast<int64_t>(l.mel_blocks) * l.padded_text + 1) / 2 * 2;
  s.tile_offset = (s.walk_offset + 2 * static_cast<int64_t>(l.padded_text) + 3) / 4 * 4;
  s.bytes = 4 * (s.tile_offset + static_cast<int64_t>(W) * kFusedStages * 32 * K * 32);
  return s;
}

__device__ __forceinline__ int ld_acquire_cta(const int* p) {
  int v;
  asm volatile("ld.acquire.cta.shared::cta.s32 %0, [%1];\n"
               : "=r"(v) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_cta(int* p, int v) {
  asm volatile("st.release.cta.shared::cta.s32 [%0], %1;\n"
               ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(p))), "r"(v) : "memory");
}

// The stress test's hook (launch_fast_mas_fused's `jitter`; production runs kNone, where
// every call below compiles to nothing): a seeded random __nanosleep of up to ~4 us, one
// site in four, at the points where the hand-over's order matters, so that a few thousand
// launches see the producer and consumer warps in many relative positions. kSleepEarlyRelease
// also publishes each chunk's progress before the chunk's row is written: a deliberate bug
// the test must catch, which shows that the sleeps do expose a misordered hand-over.
template <FusedJitter MODE>
struct Jitter {
  unsigned seed;
  int item, warp, lane, chunk;
  __device__ __forceinline__ void at(int site) const {
    if constexpr (MODE != FusedJitter::kNone) {
      unsigned h = seed ^ (item * 0x9e3779b9u) ^ (warp * 0x85ebca6bu) ^ (lane * 0xc2b2ae35u) ^
                   (site * 0x27d4eb2fu) ^ (chunk * 0x165667b1u);
      h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
      if ((h & 3) == 0) __nanosleep((h >> 4) & 4095);
    }
  }
};

// Copies rows [x0, x0 + rows) x columns [y0, y0 + 32) of the item into a 32K x 32 tile
// (layout: tile_index<K>). `warp_src` points at (x0, 0). VEC=4: 16-byte copies, 8 lanes per
// 128-byte row segment (rows 16-byte aligned); VEC=1: 4-byte copies, a warp per row. Columns
// from mel_len on are zero-filled; rows from `rows` on are left as they are (garbage rows
// below the text length never reach a valid row).
template <int K, int VEC>
__device__ __forceinline__ void fused_load_tile(float* tile, const float* warp_src, int max_mel,
                                                int rows, int mel_len, int y0, int lane) {
  if constexpr (VEC == 4) {
    const int sub = lane >> 3, col = (lane & 7) * 4;
    const int bytes = 4 * max(0, min(4, mel_len - (y0 + col)));
    // Nothing is read when bytes == 0; the address stays a valid one.
    const float* src = warp_src + static_cast<int64_t>(sub) * max_mel + (bytes ? y0 + col : 0);
    const int64_t stride4 = 4 * static_cast<int64_t>(max_mel);
    if (rows == 32 * K) {  // every warp but an utterance's last: no per-row test
#pragma unroll 8
      for (int it = 0; it < 8 * K; ++it) {
        cp_async16(tile + tile_index<K>(it * 4 + sub, col), src + it * stride4, bytes);
      }
    } else {
      const int its = (rows - sub + 3) >> 2;  // this lane's rows below `rows`
#pragma unroll 4
      for (int it = 0; it < its; ++it) cp_async16(tile + tile_index<K>(it * 4 + sub, col), src + it * stride4, bytes);
    }
  } else {
    const int bytes = y0 + lane < mel_len ? 4 : 0;
    const float* src = warp_src + (bytes ? y0 + lane : 0);
#pragma unroll 8
    for (int row = 0; row < rows; ++row, src += max_mel) cp_async4(tile + tile_index<K>(row, lane), src, bytes);
  }
}

// Sets `bit` in `word` when the path through this cell comes from the diagonal (diag >
// stay): a compare and a predicated or, two instructions.
__device__ __forceinline__ void mark_diagonal(uint32_t& word, float diag, float stay, uint32_t bit) {
  asm("{\n .reg .pred p;\n setp.gt.f32 p, %1, %2;\n @p or.b32 %0, %0, %3;\n}"
      : "+r"(word) : "f"(diag), "f"(stay), "r"(bit));
}

// One 32-column chunk, fully unrolled and free of branches: every lane reads the row above
// (a broadcast; lane 31 sends it down), then per column one shuffle and, per row, a
// compare, a max, an add and the non-finite check. EDGE chunks also replace logp outside
// the band by 0 (see the file comment).
template <int K, bool EDGE, FusedJitter MODE>
__device__ __forceinline__ void fused_chunk(const float* tile, const float* up_row, float& carry,
                                            float* my_row, bool publish, float (&q)[K],
                                            uint32_t (&word)[K], float (&check)[K], int lane,
                                            int src_lane, int x, int y0, int band_width,
                                            const Jitter<MODE>& jitter) {
#pragma unroll
  for (int g = 0; g < 8; ++g) {
    const int y = y0 + 4 * g;
    float4 v[K];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      v[j] = *reinterpret_cast<const float4*>(tile + (lane * K + j) * 32 + (((g ^ lane) & 7) << 2));
    }
    const float4 u = *reinterpret_cast<const float4*>(up_row + y);  // columns y .. y+3
    const float4 up = make_float4(carry, u.x, u.y, u.z);            // the row above at y-1 .. y+2
    carry = u.w;
    float out[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const float send = lane == 31 ? component(up, c) : q[K - 1];
      const float from_above = __shfl_sync(kFullMask, send, src_lane);
      const int offset = y + c - x;  // column minus this lane's first row
#pragma unroll
      for (int j = K - 1; j >= 0; --j) {  // last row first: q[j-1] still holds column y+c-1
        float val = component(v[j], c);
        if constexpr (EDGE) {
          if (static_cast<unsigned>(offset - j) > static_cast<unsigned>(band_width)) val = 0.0f;
        }
        const float stay = q[j];
        const float diag = j ? q[j - 1] : from_above;
        mark_diagonal(word[j], diag, stay, 1u << (4 * g + c));
        q[j] = fmaxf(stay, diag) + val;
        check[j] = fmaf(val, 0.0f, check[j]);  // stays 0 unless val is inf or nan
      }
      out[c] = q[K - 1];
    }
    if (publish && lane == 31) {
      *reinterpret_cast<float4*>(my_row + y) = make_float4(out[0], out[1], out[2], out[3]);
      jitter.at(8 + g);  // a half-written row: the next warp must not be reading it yet
    }
  }
}

template <int K, int VEC, FusedJitter MODE>
__global__ void __launch_bounds__(32 * kMaxFusedWarps)
    fused_v4(const float* __restrict__ logp, int max_text, int max_mel, DeviceLengths text_lengths,
             DeviceLengths mel_lengths, float neg_inf, FastMasLayout layout, int32_t* ws,
             int* __restrict__ durations, unsigned jitter_seed) {
  extern __shared__ __align__(16) float smem[];
  const FusedSmem sm = fused_smem(layout);
  int* progress = reinterpret_cast<int*>(smem);
  uint32_t* bits = reinterpret_cast<uint32_t*>(smem + sm.bits_offset);
  const int b = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int W = layout.warps_per_item;
  const int text_len = length_at(text_lengths, b), mel_len = length_at(mel_lengths, b);
  int* dur = durations + static_cast<int64_t>(b) * max_text;
  int* first = ws + layout.starts_offset + static_cast<int64_t>(b) * max_text;
  const bool valid = lengths_valid(text_len, mel_len, max_text, max_mel);
  for (int x = (valid ? text_len : 0) + threadIdx.x; x < max_text; x += blockDim.x) dur[x] = 0, first[x] = 0;
  if (!valid) {
    if (threadIdx.x == 0) atomicMax(&ws[0], layout.batch - b);
    return;
  }
  if (threadIdx.x < kMaxFusedWarps) progress[threadIdx.x] = 0;
  // Row 0 is the first warp's virtual row above: Q[-1][y] = neg_inf (Q[-1][-1] = 0 is its
  // initial carry).
  for (int y = threadIdx.x; y < sm.row_len; y += blockDim.x) smem[sm.brow_offset + y] = neg_inf;
  __syncthreads();

  const int x0 = warp * 32 * K;
  if (x0 < text_len) {
    const int band_width = mel_len - text_len;
    const int rows = min(32 * K, text_len - x0);
    const int chunks = (band_width + rows + 31) / 32;  // columns x0 .. x0 + rows - 1 + band_width
    const int up_last = band_width + x0 - 1;  // the previous warp's last band column
    const bool publish = warp + 1 < W && x0 + 32 * K < text_len;
    const float* up_row = smem + sm.brow_offset + static_cast<int64_t>(warp) * sm.row_len;
    float* my_row = smem + sm.brow_offset + static_cast<int64_t>(warp + 1) * sm.row_len;
    float* tiles = smem + sm.tile_offset + static_cast<int64_t>(warp) * kFusedStages * 32 * K * 32;
    const float* item = logp + static_cast<int64_t>(b) * max_text * max_mel;
    const float* warp_src = item + static_cast<int64_t>(x0) * max_mel;
    const int x = x0 + lane * K, src_lane = (lane + 31) & 31;

    float q[K], check[K];
#pragma unroll
    for (int j = 0; j < K; ++j) q[j] = neg_inf, check[j] = 0.0f;
    float carry = 0.0f;  // the row above at column y0-1 of the next chunk: Q[-1][-1] = 0 for warp 0
    constexpr int kTile = 32 * K * 32;
#pragma unroll 1
    for (int s = 0; s < kFusedStages - 1; ++s) {
      const int y = x0 + 32 * s;
      if (s < chunks) fused_load_tile<K, VEC>(tiles + s * kTile, warp_src, max_mel, rows, mel_len, y, lane);
      cp_async_commit();
    }
    int polls = 0;
#pragma unroll 1
    for (int i = 0; i < chunks; ++i) {
      MONOFLOW_TRACE(b, warp, i, lane)
      const Jitter<MODE> jitter{jitter_seed, b, warp, lane, i};
      jitter.at(0);
      const int y0 = x0 + 32 * i;
      if constexpr (MODE == FusedJitter::kSleepEarlyRelease) {
        if (publish && lane == 31) st_release_cta(progress + warp, y0 + 32);
      }
      if (i + kFusedStages - 1 < chunks) {
        const int y = y0 + 32 * (kFusedStages - 1);
        fused_load_tile<K, VEC>(tiles + ((i + kFusedStages - 1) % kFusedStages) * kTile, warp_src,
                                max_mel, rows, mel_len, y, lane);
      }
      cp_async_commit();
      if (warp > 0) {  // wait for the previous warp's columns y0-1 .. y0+30
        if (lane == 0) {
          const int need = min(y0 + 31, up_last + 1);
          while (ld_acquire_cta(progress + warp - 1) < need) {
            if (++polls == (1 << 22)) {
              atomicExch(ws + 2, 1);
              break;
            }
          }
        }
        __syncwarp();
        jitter.at(1);  // lanes other than lane 0 read the row above later than its acquire
        if (i == 0) carry = up_row[y0 - 1];
      }
      cp_async_wait<kFusedStages - 1>();
      __syncwarp();
      MONOFLOW_TRACE(b, warp, kTraceArrival + i, lane)
      uint32_t word[K];
#pragma unroll
      for (int j = 0; j < K; ++j) word[j] = 0;
      const float* tile = tiles + (i % kFusedStages) * kTile;
      if (y0 >= x0 + 32 * K && y0 + 31 <= band_width + x0) {
        fused_chunk<K, false>(tile, up_row, carry, my_row, publish, q, word, check, lane, src_lane,
                              x, y0, band_width, jitter);
      } else {
        fused_chunk<K, true>(tile, up_row, carry, my_row, publish, q, word, check, lane, src_lane,
                             x, y0, band_width, jitter);
      }
      uint32_t* dst = bits + static_cast<int64_t>(y0 >> 5) * layout.padded_text + x;
#pragma unroll
      for (int j = 0; j < K; ++j) dst[j] = word[j];
      jitter.at(2);
      if (MODE != FusedJitter::kSleepEarlyRelease && publish && lane == 31) {
        st_release_cta(progress + warp, y0 + 32);
      }
      jitter.at(3);  // a lane still reading its tile while the others would refill it
      __syncwarp();  // the tile stage is refilled next iteration
    }
    float bad = 0.0f;
#pragma unroll
    for (int j = 0; j < K; ++j) bad += x + j < text_len ? check[j] : 0.0f;
    if (bad != 0.0f) atomicMax(&ws[1], layout.batch - b);
  }
  __syncthreads();
  int2* walk = reinterpret_cast<int2*>(smem + sm.walk_offset);
  if (threadIdx.x == 0) {
    // Backtracking (one thread): in row idx the path steps down at the last column c <= y
    // with a set bit, or at c = idx (the diagonal) if none: the original's rule. One
    // shared-memory load and one store per step (see the file comment).
    MONOFLOW_TRACE(b, 0, kTraceChunks - 2, 0)
    const int P = layout.padded_text;
    int idx = text_len - 1, y = mel_len - 1, run_end = y;
    while (idx > 0) {
      const int blk = y >> 5;
      // Bits below the diagonal are 0 (both scores there are exactly neg_inf); the
      // diagonal's own bit is forced. Shifted so that column y is the top bit: the last
      // candidate at or below y is the highest set bit, clz columns before y.
      const uint32_t diagonal = static_cast<uint32_t>(blk == (idx >> 5)) << (idx & 31);
      const uint32_t mask = (bits[blk * P + idx] | diagonal) << ((y & 31) ^ 31);
      const int p = y - __clz(mask);
      walk[idx] = make_int2(run_end - p + 1, p);  // rewritten until the step is found
      const bool found = mask != 0;
      y = found ? p - 1 : (blk << 5) - 1;
      run_end = found ? p - 1 : run_end;
      idx -= found;
    }
    walk[0] = make_int2(run_end + 1, 0);
    MONOFLOW_TRACE(b, 0, kTraceChunks - 1, 0)
  }
  __syncthreads();
  for (int x = threadIdx.x; x < text_len; x += blockDim.x) {
    const int2 w = walk[x];
    dur[x] = w.x, first[x] = w.y;
  }
}

}  // namespace

int64_t fast_mas_fused_smem(const FastMasLayout& layout) {
  if (layout.warps_per_item > kMaxFusedWarps || (layout.rows_per_lane != 2 && layout.rows_per_lane != 4)) {
    return -1;
  }
  return fused_smem(layout).bytes;
}

cudaError_t launch_fast_mas_fused(const float* logp, int max_text, int max_mel,
                                  DeviceLengths text_lengths, DeviceLengths mel_lengths,
                                  float neg_inf, const FastMasLayout& layout, int32_t* workspace,
                                  int* durations, cudaStream_t stream, FusedJitter jitter,
                                  unsigned jitter_seed) {
  if (layout.batch == 0) return cudaSuccess;
  const int64_t bytes = fast_mas_fused_smem(layout);
  if (bytes < 0) return cudaErrorInvalidValue;
  // A block larger than the device allows: cudaFuncSetAttribute below refuses it.
  const dim3 grid(layout.batch), block(32 * layout.warps_per_item);
  const int smem = static_cast<int>(bytes);
  const bool vec4 = max_mel % 4 == 0 && reinterpret_cast<uintptr_t>(logp) % 16 == 0;
  auto go = [&](auto kernel) {
    cudaError_t set = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (set != cudaSuccess) return set;
    kernel<<<grid, block, smem, stream>>>(logp, max_text, max_mel, text_lengths, mel_lengths, neg_inf,
                                          layout, workspace, durations, jitter_seed);
    return cudaGetLastError();
  };
  constexpr auto kNone = FusedJitter::kNone, kSleep = FusedJitter::kSleep;
  switch (jitter) {
    case FusedJitter::kNone:
      if (layout.rows_per_lane == 2) return vec4 ? go(fused_v4<2, 4, kNone>) : go(fused_v4<2, 1, kNone>);
      return vec4 ? go(fused_v4<4, 4, kNone>) : go(fused_v4<4, 1, kNone>);
    case FusedJitter::kSleep:
      if (layout.rows_per_lane == 2) return vec4 ? go(fused_v4<2, 4, kSleep>) : go(fused_v4<2, 1, kSleep>);
      return vec4 ? go(fused_v4<4, 4, kSleep>) : go(fused_v4<4, 1, kSleep>);
    case FusedJitter::kSleepEarlyRelease:  // the negative control: one instance is enough
      if (layout.rows_per_lane != 2 || !vec4) return cudaErrorInvalidValue;
      return go(fused_v4<2, 4, FusedJitter::kSleepEarlyRelease>);
  }
  return cudaErrorInvalidValue;
}

}  // namespace monoflow::align::kernels
