// models::dropout: the Philox4x32-10 block against the published known-answer vectors, and the
// CPU dropout's mask (share, scale, gradient, reproducibility, thread-count independence).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "models/dropout.h"

namespace {

namespace models = monoflow::models;  // models::dropout: at::dropout is found by ADL too
using monoflow::models::detail::apply_dropout_mask;
using monoflow::models::detail::apply_kept_bits;
using monoflow::models::detail::philox4x32_10;

// Random123's kat_vectors for philox4x32 with 10 rounds (also what randomgen's Philox(number=4,
// width=32) gives for these counters and keys).
TEST(Philox, MatchesTheKnownAnswerVectors) {
  using Words = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// Element e is kept where its word (dropout.h: chunks of 32 elements, word r / 8 of block
// 8 (e / 32) + r % 8, r = e % 32) lies below keep * 2^32, whatever the buffer's length: the
// vectorised whole chunks and the scalar tail agree with the block function.
TEST(CpuDropout, EachElementFollowsItsPhiloxWord) {
  const uint64_t seed = 0x0123456789abcdefULL;
  const double keep = 0.5;
  for (int64_t n : {1, 3, 31, 32, 33, 1000, 70000}) {
    std::vector<float> x(n, 1.0f), y(n, -1.0f);
    apply_dropout_mask(x.data(), y.data(), n, seed, keep, 2.0f);
    for (int64_t e = 0; e < n; ++e) {
      const int64_t r = e % 32;  // chunks of 32 elements, eight blocks of four words
      const uint64_t block = e / 32 * 8 + r % 8;
      const auto words = philox4x32_10({0, 0, static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32)},
                                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
      const bool kept = words[r / 8] < (1ULL << 31);
      ASSERT_EQ(y[e], kept ? 2.0f : 0.0f) << "n " << n << ", element " << e;
    }
  }
}

// The forward's bits (one per element, bit e % 8 of byte e / 8) are its mask: applied to the
// same input they give the forward's output to the bit, whole chunks and tails alike.
TEST(CpuDropout, KeptBitsReproduceTheForward) {
  const uint64_t seed = 0x0fedcba987654321ULL;
  for (int64_t n : {1, 7, 8, 9, 31, 33, 1000, 70001}) {
    std::vector<float> x(n), y(n), again(n, -1.0f);
    for (int64_t e = 0; e < n; ++e) x[e] = std::sin(0.1f * static_cast<float>(e)) + 1.5f;
    std::vector<uint8_t> bits((n + 7) / 8, 0xAA);
    apply_dropout_mask(x.data(), y.data(), n, seed, 0.7, 1.0f / 0.7f, bits.data());
    apply_kept_bits(x.data(), again.data(), bits.data(), n, 1.0f / 0.7f);
    int64_t kept = 0;
    for (int64_t e = 0; e < n; ++e) {
      ASSERT_EQ(again[e], y[e]) << "n " << n << ", element " << e;
      kept += (bits[e / 8] >> (e % 8)) & 1;
      ASSERT_EQ(((bits[e / 8] >> (e % 8)) & 1) != 0, y[e] != 0.0f) << "n " << n << ", element " << e;
    }
    if (n == 70001) EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.01);
  }
}

TEST(CpuDropout, DropsTheShareAskedAndScalesTheRest) {
  torch::manual_seed(7);
  const torch::Tensor x = torch::rand({8, 96, 1000}) + 0.5;  // no zeros of its own
  for (double p : {0.05, 0.1, 0.5}) {
    const torch::Tensor y = models::dropout(x, p, /*training=*/true);
    const torch::Tensor kept = y != 0;
    const double dropped = 1.0 - kept.to(torch::kFloat64).mean().item<double>();
    const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(x.numel()));
    EXPECT_NEAR(dropped, p, 5 * sigma) << "p " << p;
    // The survivors are x / (1 - p), as torch::dropout's.
    EXPECT_TRUE(torch::equal(y.masked_select(kept), x.masked_select(kept) * static_cast<float>(1.0 / (1.0 - p))));
  }
}

TEST(CpuDropout, LeavesTheInputAloneOutOfTrainingOrAtZero) {
  const torch::Tensor x = torch::randn({4, 5});
  EXPECT_TRUE(models::dropout(x, 0.3, /*training=*/false).is_same(x));
  EXPECT_TRUE(models::dropout(x, 0.0, /*training=*/true).is_same(x));
}

// The backward applies the forward's mask: the gradient is the same mask and scale.
TEST(CpuDropout, GradientIsTheForwardsMask) {
  torch::manual_seed(3);
  const torch::Tensor x = (torch::rand({3, 7, 129}) + 0.5).requires_grad_();
  const torch::Tensor y = models::dropout(x, 0.2, /*training=*/true);
  const torch::Tensor upstream = torch::randn_like(y);
  y.backward(upstream);
  const torch::Tensor expected = upstream * (y.detach() / x.detach());  // the mask times 1 / 0.8
  EXPECT_TRUE(torch::allclose(x.grad(), expected, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(x.grad() == 0, y.detach() == 0));
}

// The mask follows the CPU generator's seed, and not the thread count: each element's fate
// depends on its index alone, however the loop is split.
TEST(CpuDropout, SameSeedSameMaskWhateverTheThreads) {
  const torch::Tensor x = torch::ones({8, 96, 777});
  const int saved = at::get_num_threads();
  at::set_num_threads(1);
  torch::manual_seed(11);
  const torch::Tensor one_thread = models::dropout(x, 0.1, true);
  at::set_num_threads(4);
  torch::manual_seed(11);
  const torch::Tensor four_threads = models::dropout(x, 0.1, true);
  const torch::Tensor next_call = models::dropout(x, 0.1, true);
  at::set_num_threads(saved);
  EXPECT_TRUE(torch::equal(one_thread, four_threads));
  EXPECT_FALSE(torch::equal(four_threads, next_call));  // a new key each call
}

// Non-contiguous input: the mask follows the output's (contiguous) order; the values are x's.
TEST(CpuDropout, TakesNonContiguousInput) {
  torch::manual_seed(5);
  const torch::Tensor x = (torch::rand({40, 30}) + 0.5).t();
  const torch::Tensor y = models::dropout(x, 0.25, true);
  const torch::Tensor kept = y != 0;
  EXPECT_TRUE(torch::allclose(y.masked_select(kept), x.masked_select(kept) / 0.75f));
}

// Other dtypes go to torch::dropout (same contract).
TEST(CpuDropout, OtherDtypesStillDrop) {
  torch::manual_seed(2);
  const torch::Tensor x = torch::ones({1000}, torch::kFloat64);
  const torch::Tensor y = models::dropout(x, 0.5, true);
  const double zeros = (y == 0).to(torch::kFloat64).mean().item<double>();
  EXPECT_GT(zeros, 0.4);
  EXPECT_LT(zeros, 0.6);
  EXPECT_TRUE(torch::equal(y.masked_select(y != 0), torch::full({(y != 0).sum().item<int64_t>()}, 2.0,
                                                                torch::kFloat64)));
}

}  // namespace
