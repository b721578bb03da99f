// `cuda-fast` backend: forward pass that stores one decision bit per cell, then a
// run-length backtracking walk over those bits. Nothing is written to logp.
//
// Forward (fast_forward_kernel): one warp per block and per 32*K text rows; lane l owns
// the K consecutive rows [x0 + l*K, x0 + l*K + K). A column step is, per lane, K
// independent max/add/compare chains plus one warp shuffle that hands the lane's last row
// (column y-1) to the next lane. Warps of one utterance form a pipeline: warp w publishes
// its last row to a global boundary buffer every 32 columns and warp w+1 reads it (with an
// acquire/release progress counter). Blocks take a ticket at start, so a warp only ever
// waits on a warp that is already running: no deadlock however the grid is scheduled.
// logp tiles of 32K rows x 32 columns stream through shared memory with cp.async,
// coalesced (8 lanes per 128-byte row segment), swizzled so that each lane's reads of its
// own rows are bank-conflict free, three stages deep.
//
// Variants kept side by side (selected by rows per lane and vector width, see
// fast_mas_layout and the launcher); figures in docs/benchmarks.md:
//   K=8: fewer warps and handoffs, more work per column step.
//   K=4: twice the warps: the column step halves, more pipeline fill; on an H100 at
//        B=32, T=2048 both fit on the chip at once.
//   VEC=4: 16-byte cp.async (rows 16-byte aligned: S % 4 == 0); VEC=1: 4-byte fallback.
//
// Walk (fast_walk_kernel): one warp per utterance. The path leaves row x at the highest
// set bit at or below the current column, so each step jumps over a whole run of frames
// (find-last-set on a 32-column word): T + S/32 steps instead of S. The words of 32 rows
// around the current row are held one per lane and fetched two 32-column blocks ahead.
#include "align/kernels/mas_kernels.h"

#include <cstdio>

namespace monoflow::align::kernels {

int64_t FastMasLayout::bit_words() const {
  return static_cast<int64_t>(batch) * mel_blocks * padded_text;
}
int64_t FastMasLayout::boundary_floats() const {
  return static_cast<int64_t>(batch) * warps_per_item * boundary_stride;
}
int64_t FastMasLayout::sync_ints() const {
  return 1 + static_cast<int64_t>(batch) * warps_per_item;
}

FastMasLayout fast_mas_layout(int batch, int max_text, int max_mel, int rows_per_lane) {
  FastMasLayout l;
  l.batch = batch;
  l.rows_per_lane = rows_per_lane;
  l.warps_per_item = (max_text + 32 * rows_per_lane - 1) / (32 * rows_per_lane);
  l.padded_text = l.warps_per_item * 32 * rows_per_lane;
  l.mel_blocks = (max_mel + 31) / 32;
  l.boundary_stride = l.mel_blocks * 32 + 64;  // room for the last chunk's 36-float reads
  return l;
}

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kStages = 3;

__device__ __forceinline__ void cp_async16(float* smem, const float* gmem, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(float* smem, const float* gmem, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(int* p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Tile element (row, col) of a 32K x 32 tile: 16-byte groups of a row are XOR-swizzled by
// the owning lane (row / K), so the 8 lanes of a quarter-warp reading their own rows at the
// same column group hit 8 different bank groups.
template <int K>
__device__ __forceinline__ int tile_index(int row, int col) {
  return row * 32 + ((((col >> 2) ^ (row / K)) & 7) << 2) + (col & 3);
}

// Issues the copies of tile rows [x0, x0+32K) x columns [y0, y0+32) into `tile`; cells
// outside the item's lengths are zero-filled without being read.
template <int K, int VEC>
__device__ __forceinline__ void load_tile(float* tile, const float* item, int max_mel, int x0,
                                          int y0, int text_len, int mel_len, int lane) {
  if constexpr (VEC == 4) {
#pragma unroll
    for (int it = 0; it < K * 8; ++it) {
      const int piece = it * 32 + lane, row = piece >> 3, col = (piece & 7) * 4;
      const int x = x0 + row, y = y0 + col;
      const int cols = (x < text_len) ? max(0, min(4, mel_len - y)) : 0;
      const float* src = cols ? item + static_cast<int64_t>(x) * max_mel + y : item;
      cp_async16(tile + tile_index<K>(row, col), src, cols * 4);
    }
  } else {
#pragma unroll 4
    for (int row = 0; row < 32 * K; ++row) {
      const int x = x0 + row, y = y0 + lane;
      const bool in = x < text_len && y < mel_len;
      const float* src = in ? item + static_cast<int64_t>(x) * max_mel + y : item;
      cp_async4(tile + tile_index<K>(row, lane), src, in ? 4 : 0);
    }
  }
}

// One 32-column chunk of the forward recursion for this lane's K rows. q[j] holds
// Q[x0 + lane*K + j][y0 - 1] on entry and Q[..][y0 + 31] on exit. up[c + 3] (lane 31 only)
// is Q[x0 - 1][y0 + c - 1], the previous warp's last row. MASKED handles the band's edges:
// cells above the diagonal (y < x) are exactly neg_inf, the diagonal forces the step down,
// and only band cells are checked for finiteness. Unmasked chunks lie inside the band.
template <int K, bool MASKED>
__device__ __forceinline__ void forward_chunk(const float* tile, float (&q)[K], const float (&up)[36],
                                              float (&out)[32], uint32_t (&bits)[K], float& check,
                                              int lane, int x0, int y0, int band_width,
                                              int text_len, float neg_inf) {
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
      const float from_above = __shfl_sync(kFull, send, (lane + 31) & 31);
#pragma unroll
      for (int j = K - 1; j >= 0; --j) {
        const float val = cc == 0 ? v[j].x : cc == 1 ? v[j].y : cc == 2 ? v[j].z : v[j].w;
        const float stay = q[j];
        const float diag = j ? q[j - 1] : from_above;
        bool down = diag > stay;
        float next = fmaxf(stay, diag) + val;
        if constexpr (MASKED) {
          const int x = x0 + lane * K + j, y = y0 + c;
          if (y < x) next = neg_inf;
          down = down || y == x;
          if (y >= x && y - x <= band_width && x < text_len) check = fmaf(val, 0.0f, check);
        } else {
          check = fmaf(val, 0.0f, check);  // stays 0 unless val is inf or nan
        }
        q[j] = next;
        if (down) bits[j] |= 1u << c;
      }
      out[c] = q[K - 1];
    }
  }
}

template <int K, int VEC>
__global__ void __launch_bounds__(32) fast_forward_kernel(
    const float* __restrict__ logp, int batch, int max_text, int max_mel,
    const int* __restrict__ text_lengths, const int* __restrict__ mel_lengths, float neg_inf,
    FastMasLayout layout, uint32_t* __restrict__ bits, float* boundary, int* sync,
    int* __restrict__ flags) {
  extern __shared__ __align__(16) float tiles[];
  const int lane = threadIdx.x;
  int ticket = 0;
  if (lane == 0) ticket = atomicAdd(&sync[0], 1);
  ticket = __shfl_sync(kFull, ticket, 0);
  const int W = layout.warps_per_item;
  const int b = ticket / W, w = ticket % W;
  int* progress = sync + 1 + b * W;

  const int text_len = text_lengths[b], mel_len = mel_lengths[b];
  if (text_len < 1 || mel_len < text_len || text_len > max_text || mel_len > max_mel) {
    if (lane == 0 && w == 0) atomicMax(&flags[0], batch - b);
    return;
  }
  const int x0 = w * 32 * K;
  if (x0 >= text_len) return;
  const int band_width = mel_len - text_len;
  const int last_row = min(x0 + 32 * K, text_len) - 1;
  const int y_first = x0, y_last = band_width + last_row;  // this warp's columns
  const int chunks = (y_last - y_first + 32) / 32;
  const int up_last = band_width + x0 - 1;  // last column the previous warp publishes
  const float* item = logp + static_cast<int64_t>(b) * max_text * max_mel;
  const float* up_row = boundary + static_cast<int64_t>(b * W + w - 1) * layout.boundary_stride;
  float* my_row = boundary + static_cast<int64_t>(b * W + w) * layout.boundary_stride;
  uint32_t* bit_base = bits + static_cast<int64_t>(b) * layout.mel_blocks * layout.padded_text +
                       x0 + lane * K;

  // Boundary values for chunk starting at y0 (lane 31): up[c+3] = Q[x0-1][y0+c-1].
  auto fetch_up = [&](float(&up)[36], int y0) {
    if (w == 0) {
#pragma unroll
      for (int k = 0; k < 36; ++k) up[k] = (k == 3 && y0 == 0) ? 0.0f : neg_inf;
      return;
    }
    if (lane != 31) return;
    const int need = min(y0 + 31, up_last + 1);
    while (load_acquire(progress + w - 1) < need) {
    }
#pragma unroll
    for (int k = 0; k < 9; ++k) {
      const float4 f = __ldcg(reinterpret_cast<const float4*>(up_row + y0 - 4) + k);
      up[4 * k] = f.x, up[4 * k + 1] = f.y, up[4 * k + 2] = f.z, up[4 * k + 3] = f.w;
    }
  };

  float q[K];
#pragma unroll
  for (int j = 0; j < K; ++j) q[j] = neg_inf;
  float up[36], up_next[36], out[32];
  float check = 0.0f;
  fetch_up(up, y_first);

  constexpr int kTile = 32 * K * 32;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) load_tile<K, VEC>(tiles + s * kTile, item, max_mel, x0, y_first + 32 * s,
                                      text_len, mel_len, lane);
    cp_async_commit();
  }
  for (int i = 0; i < chunks; ++i) {
    const int y0 = y_first + 32 * i;
    if (i + kStages - 1 < chunks) {
      load_tile<K, VEC>(tiles + ((i + kStages - 1) % kStages) * kTile, item, max_mel, x0,
                        y0 + 32 * (kStages - 1), text_len, mel_len, lane);
    }
    cp_async_commit();
    if (i + 1 < chunks) fetch_up(up_next, y0 + 32);
    cp_async_wait<kStages - 1>();
    __syncwarp();

    uint32_t word[K];
#pragma unroll
    for (int j = 0; j < K; ++j) word[j] = 0;
    const float* tile = tiles + (i % kStages) * kTile;
    const bool clean = y0 >= x0 + 32 * K && y0 + 31 <= band_width + x0;
    if (clean) {
      forward_chunk<K, false>(tile, q, up, out, word, check, lane, x0, y0, band_width, text_len,
                              neg_inf);
    } else {
      forward_chunk<K, true>(tile, q, up, out, word, check, lane, x0, y0, band_width, text_len,
                             neg_inf);
    }
    __syncwarp();  // the stage is refilled next iteration

    uint32_t* dst = bit_base + static_cast<int64_t>(y0 >> 5) * layout.padded_text;
#pragma unroll
    for (int j = 0; j < K; j += 4) {
      *reinterpret_cast<uint4*>(dst + j) = make_uint4(word[j], word[j + 1], word[j + 2], word[j + 3]);
    }
    if (lane == 31 && w + 1 < W && x0 + 32 * K < text_len) {  // a next warp exists
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        __stcg(reinterpret_cast<float4*>(my_row + y0) + k,
               make_float4(out[4 * k], out[4 * k + 1], out[4 * k + 2], out[4 * k + 3]));
      }
      store_release(progress + w, min(y0 + 32, y_last + 1));
    }
#pragma unroll
    for (int k = 0; k < 36; ++k) up[k] = up_next[k];
  }
  if (check != 0.0f) atomicMax(&flags[1], batch - b);
}

// Backtracking over the decision bits of one utterance per warp (see the file comment).
__global__ void __launch_bounds__(32) fast_walk_kernel(const uint32_t* __restrict__ bits,
                                                       int max_text, int max_mel,
                                                       const int* __restrict__ text_lengths,
                                                       const int* __restrict__ mel_lengths,
                                                       FastMasLayout layout,
                                                       int* __restrict__ durations,
                                                       int* __restrict__ starts) {
  const int b = blockIdx.x, lane = threadIdx.x;
  const int text_len = text_lengths[b], mel_len = mel_lengths[b];
  int* dur = durations + static_cast<int64_t>(b) * max_text;
  int* first = starts + static_cast<int64_t>(b) * max_text;
  const bool valid = text_len >= 1 && mel_len >= text_len && text_len <= max_text &&
                     mel_len <= max_mel;
  for (int x = (valid ? text_len : 0) + lane; x < max_text; x += 32) dur[x] = 0, first[x] = 0;
  if (!valid) return;  // reported by the forward kernel
  const uint32_t* item = bits + static_cast<int64_t>(b) * layout.mel_blocks * layout.padded_text;

  // Windows of 96 rows (3 words per lane) for the current block and the two below it.
  struct Window {
    uint32_t w0, w1, w2;
    int base;
  };
  auto fetch = [&](int blk, int anchor) {
    Window win;
    win.base = anchor - 95;
    const uint32_t* col = item + static_cast<int64_t>(max(blk, 0)) * layout.padded_text;
    const int r0 = win.base + lane, r1 = r0 + 32, r2 = r0 + 64;
    win.w0 = (blk >= 0 && r0 >= 0) ? __ldg(col + r0) : 0u;
    win.w1 = (blk >= 0 && r1 >= 0) ? __ldg(col + r1) : 0u;
    win.w2 = (blk >= 0 && r2 >= 0) ? __ldg(col + r2) : 0u;
    return win;
  };
  int idx = text_len - 1, y = mel_len - 1, run_end = y;
  int blk = y >> 5;
  Window cur = fetch(blk, idx), next1 = fetch(blk - 1, idx), next2 = fetch(blk - 2, idx);
  while (idx > 0 && blk >= 0) {  // blk < 0 cannot happen on bits of a valid forward pass
    const int k = idx - cur.base;  // in [0, 96) by the window argument above
    const uint32_t sel = k < 32 ? cur.w0 : (k < 64 ? cur.w1 : cur.w2);
    const uint32_t word = __shfl_sync(kFull, sel, k & 31);
    const uint32_t mask = word & (0xffffffffu >> (31 - (y & 31)));
    if (mask) {
      const int p = (blk << 5) + 31 - __clz(mask);  // (idx, p) comes from (idx-1, p-1)
      if (lane == 0) dur[idx] = run_end - p + 1, first[idx] = p;
      --idx;
      y = run_end = p - 1;
    } else {
      y = (blk << 5) - 1;  // the run continues into the block to the left
    }
    if (y < (blk << 5)) {
      --blk;
      cur = next1, next1 = next2, next2 = fetch(blk - 2, idx);
    }
  }
  if (lane == 0) dur[0] = run_end + 1, first[0] = 0;
}

void set_smem_limit(const void* kernel, int bytes) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

template <int K, int VEC>
cudaError_t launch_forward(const float* logp, int batch, int max_text, int max_mel,
                           const int* text_lengths, const int* mel_lengths, float neg_inf,
                           const FastMasLayout& layout, uint32_t* bits, float* boundary,
                           int* sync, int* flags, cudaStream_t stream) {
  const int smem = kStages * 32 * K * 32 * static_cast<int>(sizeof(float));
  static bool configured = false;  // per instantiation; the attribute is per device function
  if (!configured) {
    set_smem_limit(reinterpret_cast<const void*>(&fast_forward_kernel<K, VEC>), smem);
    configured = true;
  }
  fast_forward_kernel<K, VEC><<<batch * layout.warps_per_item, 32, smem, stream>>>(
      logp, batch, max_text, max_mel, text_lengths, mel_lengths, neg_inf, layout, bits, boundary,
      sync, flags);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fast_mas_forward(const float* logp, int batch, int max_text, int max_mel,
                                    const int* text_lengths, const int* mel_lengths,
                                    float neg_inf, const FastMasLayout& layout, uint32_t* bits,
                                    float* boundary, int* sync, int* flags, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  const bool vec4 = max_mel % 4 == 0 && reinterpret_cast<uintptr_t>(logp) % 16 == 0;
  const int K = layout.rows_per_lane;
#define MONOFLOW_FAST_FORWARD(KK, VV)                                                          \
  return launch_forward<KK, VV>(logp, batch, max_text, max_mel, text_lengths, mel_lengths,     \
                                neg_inf, layout, bits, boundary, sync, flags, stream)
  if (K == 4) {
    if (vec4) MONOFLOW_FAST_FORWARD(4, 4);
    MONOFLOW_FAST_FORWARD(4, 1);
  }
  if (K == 8) {
    if (vec4) MONOFLOW_FAST_FORWARD(8, 4);
    MONOFLOW_FAST_FORWARD(8, 1);
  }
#undef MONOFLOW_FAST_FORWARD
  return cudaErrorInvalidValue;
}

cudaError_t launch_fast_mas_walk(const uint32_t* bits, int batch, int max_text, int max_mel,
                                 const int* text_lengths, const int* mel_lengths,
                                 const FastMasLayout& layout, int* durations, int* starts,
                                 cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  fast_walk_kernel<<<batch, 32, 0, stream>>>(bits, max_text, max_mel, text_lengths, mel_lengths, layout,
                                             durations, starts);
  return cudaGetLastError();
}

}  // namespace monoflow::align::kernels
