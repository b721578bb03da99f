// The lengths of the synthetic LJSpeech-shaped batches every benchmark runs on
// (docs/design.md, "Benchmark specifications: Training step"): per utterance a text length
// drawn uniformly from [60, 180] and a mel length round(text x 5.6 x U(0.85, 1.15)) capped at
// 1000, drawn in pairs from one std::mt19937_64 stream. bench_train_step (tools/bench/step_bench.cpp)
// draws each batch's tokens and mel values from the same stream right after its lengths;
// bench_mas's training-batch point and dev/cuda/mas_fast.cu take the first batch of
// kSyntheticSeed. Pure C++ (no LibTorch), so that dev/cuda can include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace monoflow {

constexpr uint64_t kSyntheticSeed = 1234;  // the benchmarks' seed

// Rank r of a data-parallel benchmark draws its own batches from this seed.
inline uint64_t synthetic_rank_seed(uint64_t seed, int rank) {
  return seed + 7919ULL * static_cast<uint64_t>(rank);
}

struct SyntheticLengths {
  std::vector<int64_t> text, mel;  // [B] each
  int64_t max_text() const { return *std::max_element(text.begin(), text.end()); }
  int64_t max_mel() const { return *std::max_element(mel.begin(), mel.end()); }
};

class SyntheticBatches {
 public:
  explicit SyntheticBatches(uint64_t seed) : rng_(seed) {}

  // The next batch's lengths (batch_size >= 1).
  SyntheticLengths next_lengths(int batch_size) {
    std::uniform_int_distribution<int64_t> text_len(60, 180);
    std::uniform_real_distribution<double> stretch(0.85, 1.15);
    SyntheticLengths l;
    l.text.resize(batch_size);
    l.mel.resize(batch_size);
    for (int b = 0; b < batch_size; ++b) {
      l.text[b] = text_len(rng_);
      l.mel[b] = std::min<int64_t>(1000, std::llround(l.text[b] * 5.6 * stretch(rng_)));
    }
    return l;
  }

  // The stream itself, for what a benchmark draws between batches (tokens, values).
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace monoflow
