// Bucket lengths past cuDNN's slow shapes (src/train/bucket_lengths.h): the decision on given
// timings on the CPU; on a GPU (skipped without one), the measured choice is one of the
// candidates, made once per shape, with cuDNN's benchmark setting left as it was.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "train/bucket_lengths.h"

namespace monoflow::train {
namespace {

TEST(BucketLengths, KeepsTheBucketWhenTheCostPerFrameIsFlat) {
  EXPECT_EQ(cheapest_length({512, 516, 520, 528}, {100.0, 100.8, 101.6, 103.1}), 0u);
}

TEST(BucketLengths, PadsPastACliffAtTheBucketsLength) {
  // The bf16 weight gradient of docs/benchmarks.md: 61 us at 512 decoder frames, 32 at 520,
  // plus ~45 us of forward and data gradient at each.
  EXPECT_EQ(cheapest_length({512, 516, 520, 528}, {106.0, 105.0, 77.0, 78.5}), 2u);
}

TEST(BucketLengths, KeepsTheBucketWhenTheSavingIsLessThanThePaddingCosts) {
  // 2 us saved, but 16 more frames cost the rest of the step ~8 x 16 x 0.15 us = 19 us.
  EXPECT_EQ(cheapest_length({512, 528}, {80.0, 78.0}), 0u);
  // Without counting the rest of the step the shorter time would win.
  EXPECT_EQ(cheapest_length({512, 528}, {80.0, 78.0}, /*rest_per_conv=*/0.0), 1u);
}

TEST(BucketLengths, TiesGoToTheShortestLength) { EXPECT_EQ(cheapest_length({256, 260}, {50.0, 50.0}, 0.0), 0u); }

TEST(BucketLengths, RejectsMismatchedTimings) {
  EXPECT_THROW(cheapest_length({512, 520}, {1.0}), UserError);
  EXPECT_THROW(cheapest_length({}, {}), UserError);
  // The bucket's own length must be a candidate.
  EXPECT_THROW(BucketLengths(BucketLengthOptions().extra_frames({4, 8}), torch::kCPU), UserError);
}

TEST(BucketLengths, TheCpuKeepsEveryLength) {
  BucketLengths lengths(BucketLengthOptions{}, torch::kCPU);
  EXPECT_EQ(lengths.choose(32, 1024), 1024);
  EXPECT_EQ(lengths.choose(3, 130), 130);
}

TEST(BucketLengthsCuda, ChoosesAMeasuredCandidateOncePerShape) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    const auto o = BucketLengthOptions().channels(48).n_blocks(2).n_block_layers(2).dilation_rate(2).dtype(dtype);
    BucketLengths lengths(o, torch::kCUDA);
    at::globalContext().setBenchmarkCuDNN(false);
    const int64_t chosen = lengths.choose(4, 256);
    EXPECT_FALSE(at::globalContext().benchmarkCuDNN());
    const int64_t extra = chosen - 256;
    EXPECT_TRUE(extra == 0 || extra == 8 || extra == 16 || extra == 32) << chosen;
    EXPECT_EQ(lengths.choose(4, 256), chosen);  // the cached answer
    const std::vector<double> us = lengths.conv_us(4, {128, 256});
    ASSERT_EQ(us.size(), 2u);
    for (const double u : us) {
      EXPECT_GT(u, 0.0);
      EXPECT_LT(u, 1e6);
    }
  }
}

}  // namespace
}  // namespace monoflow::train
