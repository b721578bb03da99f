// The training-step benchmark's synthetic batches (tools/bench/step_bench.h, docs/design.md,
// "Benchmark specifications: Training step") are pinned: the values below were computed with
// the generator as it stood before the lengths moved to common/synthetic_batch.h, so the
// figures in docs/benchmarks.md were measured on exactly these batches.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "bench/step_bench.h"

namespace monoflow::train {
namespace {

std::vector<int64_t> first(const torch::Tensor& t, int n) {
  const torch::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + n);
}

TEST(SyntheticBatches, PinnedValuesOfTheBenchmarkSeed) {
  const auto batches = synthetic_batches(8, 32, 148, 80, 1234);
  ASSERT_EQ(batches.size(), 8u);
  EXPECT_EQ(first(batches[0].text_lengths, 6), (std::vector<int64_t>{174, 177, 82, 166, 70, 174}));
  EXPECT_EQ(first(batches[0].mel_lengths, 6), (std::vector<int64_t>{844, 1000, 521, 1000, 421, 861}));
  EXPECT_EQ(batches[0].text_lengths[31].item<int64_t>(), 138);
  EXPECT_EQ(batches[0].mel_lengths[31].item<int64_t>(), 755);
  EXPECT_EQ(batches[0].text.sizes(), (torch::IntArrayRef{32, 177}));
  EXPECT_EQ(batches[0].mel.sizes(), (torch::IntArrayRef{32, 80, 1000}));
  EXPECT_EQ(batches[0].text[0][0].item<int64_t>(), 104);
  EXPECT_EQ(batches[0].text[0][1].item<int64_t>(), 11);
  EXPECT_EQ(batches[0].text[31][0].item<int64_t>(), 29);
  EXPECT_EQ(batches[0].mel[0][0][0].item<float>(), -5.00030851f);
  EXPECT_EQ(batches[0].mel[31][79][754].item<float>(), -6.55127716f);
  // Later batches follow each batch's tokens and mel values in the same stream.
  EXPECT_EQ(first(batches[1].text_lengths, 6), (std::vector<int64_t>{72, 148, 96, 132, 109, 166}));
  EXPECT_EQ(first(batches[1].mel_lengths, 6), (std::vector<int64_t>{377, 719, 547, 635, 630, 881}));
  EXPECT_EQ(batches[1].text[31][0].item<int64_t>(), 107);
  EXPECT_EQ(first(batches[7].text_lengths, 6), (std::vector<int64_t>{115, 66, 145, 122, 85, 134}));
  EXPECT_EQ(first(batches[7].mel_lengths, 6), (std::vector<int64_t>{549, 416, 812, 648, 422, 749}));
  EXPECT_EQ(batches[7].mel[31][79][468].item<float>(), -2.59327102f);
  int64_t text_sum = 0, mel_sum = 0;
  for (const auto& b : batches) {
    text_sum += b.text_lengths.sum().item<int64_t>();
    mel_sum += b.mel_lengths.sum().item<int64_t>();
  }
  EXPECT_EQ(text_sum, 31024);
  EXPECT_EQ(mel_sum, 172291);
}

TEST(SyntheticBatches, PinnedValuesOfTheSecondRank) {
  // bench_train_step's rank 1 seed: 1234 + 7919.
  const auto batches = synthetic_batches(8, 32, 148, 80, 1234 + 7919);
  EXPECT_EQ(first(batches[0].text_lengths, 6), (std::vector<int64_t>{79, 115, 113, 116, 179, 130}));
  EXPECT_EQ(first(batches[0].mel_lengths, 6), (std::vector<int64_t>{500, 577, 712, 661, 974, 642}));
  EXPECT_EQ(first(batches[7].mel_lengths, 6), (std::vector<int64_t>{730, 748, 871, 996, 559, 492}));
  EXPECT_EQ(batches[1].mel[0][0][0].item<float>(), -1.18260598f);
}

// "eager-padded": the graphed step's shapes (16 tokens; 64 frames, or their least common
// multiple with n_sqz), the values kept, zeros after them, the lengths unchanged.
TEST(SyntheticBatches, PaddedAsTheGraphedStepPadsThem) {
  const auto b = synthetic_batches(1, 32, 148, 80, 1234)[0];  // text [32, 177], mel [32, 80, 1000]
  const auto p = padded_as_graphed(b, 2);
  EXPECT_EQ(p.text.sizes(), (torch::IntArrayRef{32, 192}));
  EXPECT_EQ(p.mel.sizes(), (torch::IntArrayRef{32, 80, 1024}));
  EXPECT_TRUE(torch::equal(p.text.slice(1, 0, 177), b.text));
  EXPECT_TRUE(torch::equal(p.mel.slice(2, 0, 1000), b.mel));
  EXPECT_EQ(p.text.slice(1, 177).abs().sum().item<int64_t>(), 0);
  EXPECT_EQ(p.mel.slice(2, 1000).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(p.text_lengths, b.text_lengths));
  EXPECT_TRUE(torch::equal(p.mel_lengths, b.mel_lengths));
  EXPECT_EQ(padded_as_graphed(b, 3).mel.size(2), 1152);  // multiples of lcm(64, 3) = 192
  const auto again = padded_as_graphed(p, 2);             // padded shapes stay
  EXPECT_EQ(again.text.sizes(), p.text.sizes());
  EXPECT_EQ(again.mel.sizes(), p.mel.sizes());
}

}  // namespace
}  // namespace monoflow::train
