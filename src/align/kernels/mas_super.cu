// `cuda` backend: the Super-MAS scheme (one program per utterance, parallel over the text
// axis, in place over logp, backtracking on the GPU), with the original's band and tie
// rule so that it returns the cpu backend's paths exactly.
//
// Each column y is one step: the threads update the band cells of column y from column
// y-1, then synchronise. Loads are strided by S (one element per row), as in Super-MAS;
// cuda-fast (mas_fast.cu) is the answer to that cost. Measured in docs/benchmarks.md.
#include "align/kernels/mas_fast_common.cuh"  // length_at, lengths_valid

namespace monoflow::align::kernels {
namespace {

template <typename Word>
__global__ void super_mas_kernel(float* __restrict__ logp, int batch, int max_text, int max_mel,
                                 DeviceLengths text_lengths, DeviceLengths mel_lengths,
                                 float neg_inf,
                                 Word* __restrict__ path, Word path_one, int* __restrict__ durations,
                                 int* __restrict__ flags) {
  const int b = blockIdx.x;
  const int text_len = length_at(text_lengths, b), mel_len = length_at(mel_lengths, b);
  if (!lengths_valid(text_len, mel_len, max_text, max_mel)) {
    if (threadIdx.x == 0) atomicMax(&flags[0], batch - b);
    return;
  }
  float* q = logp + static_cast<int64_t>(b) * max_text * max_mel;
  bool finite = true;
  for (int y = 0; y < mel_len; ++y) {
    const int lo = max(0, text_len + y - mel_len), hi = min(text_len - 1, y);
    for (int x = lo + static_cast<int>(threadIdx.x); x <= hi; x += blockDim.x) {
      float* cell = q + static_cast<int64_t>(x) * max_mel + y;
      const float v = *cell;
      finite = finite && isfinite(v);
      const float stay = (x == y) ? neg_inf : cell[-1];
      const float diag = (x == 0) ? (y == 0 ? 0.0f : neg_inf) : cell[-max_mel - 1];
      *cell = fmaxf(stay, diag) + v;
    }
    __syncthreads();  // column y complete before column y+1 reads it
  }
  if (!finite) atomicMax(&flags[1], batch - b);
  if (threadIdx.x != 0) return;

  // Backtracking with the original tie rule; durations and path of this item.
  Word* p = path ? path + static_cast<int64_t>(b) * max_text * max_mel : nullptr;
  int* d = durations + static_cast<int64_t>(b) * max_text;
  int index = text_len - 1, run = 0;
  for (int y = mel_len - 1; y >= 0; --y) {
    if (p) p[static_cast<int64_t>(index) * max_mel + y] = path_one;
    ++run;
    if (index != 0) {
      const float* cell = q + static_cast<int64_t>(index) * max_mel + y;
      if (index == y || cell[-1] < cell[-max_mel - 1]) {
        d[index] = run;
        run = 0;
        --index;
      }
    }
  }
  d[index] = run;
}

template <typename Word>
cudaError_t launch(float* logp, int batch, int max_text, int max_mel, DeviceLengths text_lengths,
                   DeviceLengths mel_lengths, float neg_inf, void* path, uint64_t path_one,
                   int* durations, int* flags, cudaStream_t stream) {
  const int threads = min(1024, (max_text + 31) / 32 * 32);
  super_mas_kernel<Word><<<batch, threads, 0, stream>>>(
      logp, batch, max_text, max_mel, text_lengths, mel_lengths, neg_inf,
      static_cast<Word*>(path), static_cast<Word>(path_one), durations, flags);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_super_mas(float* logp, int batch, int max_text, int max_mel,
                             DeviceLengths text_lengths, DeviceLengths mel_lengths, float neg_inf,
                             void* path, int path_bytes, uint64_t path_one, int* durations,
                             int* flags, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  switch (path_bytes) {
    case 1: return launch<uint8_t>(logp, batch, max_text, max_mel, text_lengths, mel_lengths,
                                   neg_inf, path, path_one, durations, flags, stream);
    case 2: return launch<uint16_t>(logp, batch, max_text, max_mel, text_lengths, mel_lengths,
                                    neg_inf, path, path_one, durations, flags, stream);
    case 4: return launch<uint32_t>(logp, batch, max_text, max_mel, text_lengths, mel_lengths,
                                    neg_inf, path, path_one, durations, flags, stream);
    default: return launch<uint64_t>(logp, batch, max_text, max_mel, text_lengths, mel_lengths,
                                     neg_inf, path, path_one, durations, flags, stream);
  }
}

}  // namespace monoflow::align::kernels
