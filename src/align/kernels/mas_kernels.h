// Host-callable launchers of the MAS kernels: raw device pointers and a cudaStream_t, no
// torch headers, so the .cu files compile quickly. Each launcher checks its launch and
// returns the cudaError_t; mas_cuda.cpp turns errors into exceptions.
//
// Shared conventions: logp is [B, T, S] float32, row-major; lengths are [B] int32 or int64
// on the device; `flags` is int32 [2] (cuda-fast: [3], the third set when a hand-over wait
// gives up), zeroed by the caller: flags[0] (bad lengths) and
// flags[1] (non-finite value inside a band) receive max(B - b) over offending items b, so
// the first offending item is B - flags[k] and 0 means none.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace monoflow::align::kernels {

struct DeviceLengths {
  const void* data;  // [B] on the device
  bool wide;         // int64 (true) or int32
};

// `cuda` backend (mas_super.cu): one block per utterance, threads over the text axis,
// in place over logp (it ends up holding the cumulative scores), then one thread
// backtracks, setting path[b][x][y] (element size path_bytes, value `path_one`; the path is
// zeroed by the caller; nullptr: no path) and durations[b][x] (zeroed by the caller).
cudaError_t launch_super_mas(float* logp, int batch, int max_text, int max_mel,
                             DeviceLengths text_lengths, DeviceLengths mel_lengths, float neg_inf,
                             void* path, int path_bytes, uint64_t path_one, int* durations,
                             int* flags, cudaStream_t stream);

// `cuda-fast` workspace: one int32 buffer, offsets in ints (each 16-byte aligned).
struct FastMasLayout {
  int batch;
  int rows_per_lane;    // K: text rows each lane owns (v4: 2 or 4; the split kernels: 4 or 8)
  int warps_per_item;   // W: ceil(T / (32 K)); one warp (= one block) per 32 K rows
  int padded_text;      // W * 32 * K: rows of the decision-bit array
  int mel_blocks;       // ceil(S / 32): 32-column words of the decision-bit array
  int boundary_stride;  // floats per (item, warp) row of the boundary buffer
  int64_t zeroed_ints;      // [0, zeroed_ints): flags[2], ticket, progress[B * W]; zero before a run
  int64_t starts_offset;    // int32 [B, T]: first frame of each token
  int64_t bits_offset;      // uint32 [B, mel_blocks, padded_text]: decision bits
  int64_t boundary_offset;  // [B, W, boundary_stride] 64-bit: last rows handed between warps
  int64_t boundary_ints;    // its size; zeroed before a run for the tagged hand-over
  int64_t total_ints;
};
FastMasLayout fast_mas_layout(int batch, int max_text, int max_mel, int rows_per_lane);

// Forward pass for the shapes v4 cannot take (mas_fast_forward.cu, v3; K = 4 or 8, one
// block of one warp per 32 K rows): decision bits (bit y%32 of bits[b][y/32][x] is set when the
// path through (x, y) comes from (x-1, y-1)); logp is only read. The workspace's first
// zeroed_ints and its boundary buffer must be zeroed before; the walk follows.
cudaError_t launch_fast_mas_forward(const float* logp, int max_text, int max_mel,
                                    DeviceLengths text_lengths, DeviceLengths mel_lengths,
                                    float neg_inf, const FastMasLayout& layout, int32_t* workspace,
                                    cudaStream_t stream);

// v4 (mas_fast_fused.cu): forward pass and walk in one launch, one block per utterance,
// for K = 2 or 4 and up to 8 warps per utterance. Shared memory bytes a block needs, or -1
// when v4 does not apply to the layout; the launcher returns cudaErrorInvalidValue when the
// block does not fit the device. Writes durations, the workspace's starts and flags; uses
// nothing else of the workspace (the flags must be zeroed before).
// `jitter` is for the hand-over stress test (tests/align/test_mas_handover.cpp) only:
// seeded random sleeps inside the kernel, and with kSleepEarlyRelease a deliberately broken
// hand-over (K = 2, 16-byte aligned rows only) that the test must catch.
enum class FusedJitter { kNone, kSleep, kSleepEarlyRelease };
int64_t fast_mas_fused_smem(const FastMasLayout& layout);
cudaError_t launch_fast_mas_fused(const float* logp, int max_text, int max_mel,
                                  DeviceLengths text_lengths, DeviceLengths mel_lengths,
                                  float neg_inf, const FastMasLayout& layout, int32_t* workspace,
                                  int* durations, cudaStream_t stream,
                                  FusedJitter jitter = FusedJitter::kNone, unsigned jitter_seed = 0);

// Backtracking over the bits (mas_fast_walk.cu), one warp per utterance: durations[b][x]
// ([B, T], zero for padded tokens) and the workspace's starts.
cudaError_t launch_fast_mas_walk(int max_text, int max_mel, DeviceLengths text_lengths,
                                 DeviceLengths mel_lengths, const FastMasLayout& layout,
                                 int32_t* workspace, int* durations, cudaStream_t stream);

// Dense path [B, T, S] from starts and durations (mas_path.cu): one at
// [start, start + duration) of each row, zero elsewhere; every element written once.
cudaError_t launch_path_from_durations(const int* starts, const int* durations, int batch,
                                       int max_text, int max_mel, void* path, int path_bytes,
                                       uint64_t path_one, cudaStream_t stream);

}  // namespace monoflow::align::kernels
