// Dense path from run-length form: row (b, x) is one on [start, start + duration) and zero
// elsewhere. One block per row; every element is written exactly once, 16 bytes per store
// where the rows are 16-byte aligned, so the pass runs at write bandwidth.
#include "align/kernels/mas_kernels.h"

namespace monoflow::align::kernels {
namespace {

template <typename Word, bool kVector>
__global__ void path_kernel(const int* __restrict__ starts, const int* __restrict__ durations,
                            int max_mel, Word* __restrict__ path, Word one) {
  const int64_t row = blockIdx.x;
  const int start = starts[row], end = start + durations[row];
  Word* out = path + row * max_mel;
  if constexpr (kVector) {
    constexpr int kPer = 16 / sizeof(Word);
    union Pack {
      uint4 vec;
      Word words[kPer];
    };
    for (int i = threadIdx.x; i < max_mel / kPer; i += blockDim.x) {
      Pack pack;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const int y = i * kPer + e;
        pack.words[e] = (y >= start && y < end) ? one : Word(0);
      }
      reinterpret_cast<uint4*>(out)[i] = pack.vec;
    }
  } else {
    for (int y = threadIdx.x; y < max_mel; y += blockDim.x) {
      out[y] = (y >= start && y < end) ? one : Word(0);
    }
  }
}

template <typename Word>
cudaError_t launch(const int* starts, const int* durations, int rows, int max_mel, void* path,
                   uint64_t one, cudaStream_t stream) {
  const bool vector = (static_cast<int64_t>(max_mel) * sizeof(Word)) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(path) % 16 == 0;
  const int threads = 256;
  if (vector) {
    path_kernel<Word, true><<<rows, threads, 0, stream>>>(starts, durations, max_mel,
                                                          static_cast<Word*>(path), Word(one));
  } else {
    path_kernel<Word, false><<<rows, threads, 0, stream>>>(starts, durations, max_mel,
                                                           static_cast<Word*>(path), Word(one));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_path_from_durations(const int* starts, const int* durations, int batch,
                                       int max_text, int max_mel, void* path, int path_bytes,
                                       uint64_t path_one, cudaStream_t stream) {
  const int rows = batch * max_text;
  if (rows == 0 || max_mel == 0) return cudaSuccess;
  switch (path_bytes) {
    case 1: return launch<uint8_t>(starts, durations, rows, max_mel, path, path_one, stream);
    case 2: return launch<uint16_t>(starts, durations, rows, max_mel, path, path_one, stream);
    case 4: return launch<uint32_t>(starts, durations, rows, max_mel, path, path_one, stream);
    default: return launch<uint64_t>(starts, durations, rows, max_mel, path, path_one, stream);
  }
}

}  // namespace monoflow::align::kernels
