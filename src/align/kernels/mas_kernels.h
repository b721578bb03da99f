// Host-callable launchers of the MAS kernels: raw device pointers and a cudaStream_t, no
// torch headers, so the .cu files compile quickly. Each launcher checks its launch and
// returns the cudaError_t; mas_cuda.cpp turns errors into exceptions.
//
// Shared conventions: logp is [B, T, S] float32, row-major; lengths are int32 [B] on the
// device; `flags` is int32 [2], zeroed by the caller: flags[0] (bad lengths) and flags[1]
// (non-finite value inside a band) receive max(B - b) over offending items b, so the first
// offending item is B - flags[k] and 0 means none.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace monoflow::align::kernels {

// `cuda` backend (mas_super.cu): one block per utterance, threads over the text axis,
// in place over logp (it ends up holding the cumulative scores), then one thread
// backtracks, setting path[b][x][y] (element size path_bytes, value `path_one`; the path is
// zeroed by the caller; nullptr: no path) and durations[b][x] (zeroed by the caller).
cudaError_t launch_super_mas(float* logp, int batch, int max_text, int max_mel,
                             const int* text_lengths, const int* mel_lengths, float neg_inf,
                             void* path, int path_bytes, uint64_t path_one, int* durations,
                             int* flags, cudaStream_t stream);

// `cuda-fast` buffers, sized by fast_mas_layout for a given shape and rows per lane.
struct FastMasLayout {
  int rows_per_lane;    // K: text rows each lane owns (4 or 8)
  int warps_per_item;   // W: ceil(T / (32 K)); one warp (= one block) per 32 K rows
  int padded_text;      // W * 32 * K: rows of the decision-bit array
  int mel_blocks;       // ceil(S / 32): 32-column words of the decision-bit array
  int boundary_stride;  // floats per (item, warp) row of the boundary buffer
  int64_t bit_words() const;       // uint32 words of decision bits: B * mel_blocks * padded_text
  int64_t boundary_floats() const;  // B * W * boundary_stride
  int64_t sync_ints() const;        // ticket + progress counters, zeroed before each run
  int batch;
};
FastMasLayout fast_mas_layout(int batch, int max_text, int max_mel, int rows_per_lane);

// Forward pass: decision bits (bit y%32 of bits[b][y/32][x] is set when the path through
// (x, y) comes from (x-1, y-1)), nothing written to logp. `sync` holds sync_ints() zeros.
cudaError_t launch_fast_mas_forward(const float* logp, int batch, int max_text, int max_mel,
                                    const int* text_lengths, const int* mel_lengths,
                                    float neg_inf, const FastMasLayout& layout, uint32_t* bits,
                                    float* boundary, int* sync, int* flags, cudaStream_t stream);

// Backtracking over the bits, one warp per utterance: durations[b][x] and the first frame
// of each token starts[b][x] (both [B, T]; zero for padded tokens).
cudaError_t launch_fast_mas_walk(const uint32_t* bits, int batch, int max_text, int max_mel,
                                 const int* text_lengths, const int* mel_lengths,
                                 const FastMasLayout& layout, int* durations, int* starts,
                                 cudaStream_t stream);

// Dense path [B, T, S] from starts and durations: one at [start, start + duration) of each
// row, zero elsewhere; every element written once (no separate zeroing pass).
cudaError_t launch_path_from_durations(const int* starts, const int* durations, int batch,
                                       int max_text, int max_mel, void* path, int path_bytes,
                                       uint64_t path_one, cudaStream_t stream);

}  // namespace monoflow::align::kernels
