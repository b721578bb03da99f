// Dropout as the model's modules apply it. On the CPU, torch::dropout draws its mask element by
// element from a serial Mersenne Twister (ATen's vectorised MKL path runs on Intel CPUs only):
// with the mask's division and product, 7.7 ms for one [8, 96, 1000] WN activation on one AMD
// core, 12-17% of a CPU training step of the quick-start and aligner models. Here, for float32
// CPU tensors in training, the mask is a counter-based Philox4x32-10 stream (the generator
// behind the CUDA kernels' dropout) keyed by one 64-bit draw of the CPU generator per call:
// each element's fate depends on its index alone, so the loop runs vectorised and in parallel,
// the result does not depend on the thread count, the backward reads one bit per element that
// the forward kept (drawing the mask again cost as much as the forward), and a run stays
// reproducible from the generator's seed (and exact on resume, the generator's state being in
// the checkpoint). Other dtypes and devices:
// torch::dropout.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>

namespace monoflow::models {

// x with each element zeroed with probability p and the rest scaled by 1 / (1 - p) when
// training and p > 0; x itself otherwise. p in [0, 1).
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

namespace detail {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): the four
// 32-bit outputs of one counter under one key.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Elements are taken in chunks of 4 * kDropoutLanes, one Philox block per lane: element e, at
// r = e % 32 in chunk q = e / 32, draws word r / 8 of block 8 q + r % 8 (so that each word of the
// eight blocks is eight consecutive elements, one vector).
constexpr int kDropoutLanes = 8;

// y[e] = x[e] * scale where element e is kept, else 0, for e in [0, n): element e is kept when
// its word of Philox4x32-10 at counter (0, 0, block low, block high) under key (seed low, seed
// high) is below keep * 2^32. x and y may be the same buffer. With `bits` ((n + 7) / 8 bytes),
// bit e % 8 of byte e / 8 is set where element e is kept.
void apply_dropout_mask(const float* x, float* y, int64_t n, uint64_t seed, double keep, float scale,
                        uint8_t* bits = nullptr);

// y[e] = x[e] * scale where apply_dropout_mask's `bits` say element e was kept, else 0: the same
// values as apply_dropout_mask with that mask.
void apply_kept_bits(const float* x, float* y, const uint8_t* bits, int64_t n, float scale);

}  // namespace detail
}  // namespace monoflow::models
