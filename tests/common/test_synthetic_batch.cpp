// The benchmarks' synthetic lengths (common/synthetic_batch.h): the first batch of the
// benchmark seed, pinned with values computed by the training-step benchmark's generator as it
// stood before this header (tests/train/test_synthetic_batches.cpp pins the whole batches).
#include <gtest/gtest.h>

#include <vector>

#include "common/synthetic_batch.h"

namespace monoflow {
namespace {

TEST(SyntheticBatch, FirstBatchOfTheBenchmarkSeed) {
  SyntheticBatches gen(kSyntheticSeed);
  const SyntheticLengths l = gen.next_lengths(32);
  ASSERT_EQ(l.text.size(), 32u);
  ASSERT_EQ(l.mel.size(), 32u);
  EXPECT_EQ(std::vector<int64_t>(l.text.begin(), l.text.begin() + 6),
            (std::vector<int64_t>{174, 177, 82, 166, 70, 174}));
  EXPECT_EQ(std::vector<int64_t>(l.mel.begin(), l.mel.begin() + 6),
            (std::vector<int64_t>{844, 1000, 521, 1000, 421, 861}));
  EXPECT_EQ(l.text[31], 138);
  EXPECT_EQ(l.mel[31], 755);
  EXPECT_EQ(l.max_text(), 177);
  EXPECT_EQ(l.max_mel(), 1000);
}

TEST(SyntheticBatch, RankSeedsAndRecipeBounds) {
  EXPECT_EQ(synthetic_rank_seed(kSyntheticSeed, 0), 1234u);
  EXPECT_EQ(synthetic_rank_seed(kSyntheticSeed, 1), 9153u);
  SyntheticBatches gen(synthetic_rank_seed(kSyntheticSeed, 1));
  const SyntheticLengths l = gen.next_lengths(32);
  EXPECT_EQ(std::vector<int64_t>(l.text.begin(), l.text.begin() + 6),
            (std::vector<int64_t>{79, 115, 113, 116, 179, 130}));
  EXPECT_EQ(std::vector<int64_t>(l.mel.begin(), l.mel.begin() + 6),
            (std::vector<int64_t>{500, 577, 712, 661, 974, 642}));
  // Without draws in between, consecutive batches continue the stream.
  for (int i = 0; i < 20; ++i) {
    const SyntheticLengths next = gen.next_lengths(16);
    for (int b = 0; b < 16; ++b) {
      EXPECT_GE(next.text[b], 60);
      EXPECT_LE(next.text[b], 180);
      EXPECT_GE(next.mel[b], std::llround(next.text[b] * 5.6 * 0.85) - 1);
      EXPECT_LE(next.mel[b], 1000);
    }
  }
}

}  // namespace
}  // namespace monoflow
