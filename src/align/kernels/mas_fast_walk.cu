// `cuda-fast` backtracking over the forward pass's decision bits, one warp per utterance.
//
// The path leaves row x at the highest set bit at or below the current column, so each step
// jumps over a whole run of frames (find-last-set on a 32-column word): T + S/32 steps
// instead of S. The words of the rows around the current one are held one per lane, three
// windows of 96 rows fetched two 32-column blocks ahead, so that the chain of steps rarely
// waits on memory: within one block the path descends at most 32 rows.
#include "align/kernels/mas_fast_common.cuh"

namespace monoflow::align::kernels {
namespace {

// Backtracking over the decision bits of one utterance per warp (see the file comment).
__global__ void __launch_bounds__(32) walk_kernel(int max_text, int max_mel,
                                                  DeviceLengths text_lengths,
                                                  DeviceLengths mel_lengths, FastMasLayout layout,
                                                  int32_t* __restrict__ ws,
                                                  int* __restrict__ durations) {
  const int b = blockIdx.x, lane = threadIdx.x;
  const int text_len = length_at(text_lengths, b), mel_len = length_at(mel_lengths, b);
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(ws + layout.bits_offset);
  int* starts = ws + layout.starts_offset;
  int* dur = durations + static_cast<int64_t>(b) * max_text;
  int* first = starts + static_cast<int64_t>(b) * max_text;
  const bool valid = lengths_valid(text_len, mel_len, max_text, max_mel);
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
    const uint32_t word = __shfl_sync(kFullMask, sel, k & 31);
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

}  // namespace

cudaError_t launch_fast_mas_walk(int max_text, int max_mel, DeviceLengths text_lengths,
                                 DeviceLengths mel_lengths, const FastMasLayout& layout,
                                 int32_t* workspace, int* durations, cudaStream_t stream) {
  if (layout.batch == 0) return cudaSuccess;
  walk_kernel<<<layout.batch, 32, 0, stream>>>(max_text, max_mel, text_lengths, mel_lengths,
                                               layout, workspace, durations);
  return cudaGetLastError();
}

}  // namespace monoflow::align::kernels
