#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/error.h"
#include "data/sampler.h"

namespace {

using namespace monoflow::data;

std::vector<int64_t> random_lengths(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = 50 + static_cast<int64_t>(rng() % 900);
  return v;
}

LoaderOptions opts(int batch, int64_t seed = 1234) {
  LoaderOptions o;
  o.batch_size = batch;
  o.seed = seed;
  o.bucket_batches = 8;
  return o;
}

TEST(BucketBatchSampler, EveryItemOncePerEpoch) {
  BucketBatchSampler s(random_lengths(1000, 1), opts(32));
  EXPECT_EQ(s.batches_per_epoch(), 32);  // ceil(1000 / 32)
  auto batches = s.epoch(0);
  ASSERT_EQ(batches.size(), 32u);
  std::vector<int> seen(1000, 0);
  int partial = 0;
  for (const auto& b : batches) {
    partial += b.size() != 32;
    for (int64_t i : b) seen[i]++;
  }
  EXPECT_EQ(partial, 1);
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  auto o = opts(32);
  o.drop_last = true;
  BucketBatchSampler d(random_lengths(1000, 1), o);
  EXPECT_EQ(d.batches_per_epoch(), 31);
  for (const auto& b : d.epoch(3)) EXPECT_EQ(b.size(), 32u);
}

TEST(BucketBatchSampler, DeterministicPerSeedAndEpoch) {
  auto lengths = random_lengths(500, 2);
  BucketBatchSampler a(lengths, opts(16)), b(lengths, opts(16)), c(lengths, opts(16, 99));
  EXPECT_EQ(a.epoch(5), b.epoch(5));
  EXPECT_NE(a.epoch(5), a.epoch(6));
  EXPECT_NE(a.epoch(5), c.epoch(5));
}

TEST(BucketBatchSampler, BatchesHoldSimilarLengths) {
  auto lengths = random_lengths(2000, 3);
  auto o = opts(32);
  o.bucket_batches = 32;  // windows of 1024 items sorted by length
  BucketBatchSampler s(lengths, o);
  auto padded_fraction = [&](const std::vector<std::vector<int64_t>>& batches) {
    double pad = 0, total = 0;
    for (const auto& b : batches) {
      int64_t mx = 0;
      for (int64_t i : b) mx = std::max(mx, lengths[i]);
      for (int64_t i : b) {
        pad += mx - lengths[i];
        total += mx;
      }
    }
    return pad / total;
  };
  // Random batches pad ~40% here (lengths uniform in [50, 950)); with 1024-item windows a
  // batch spans ~30 frames of length, ~3% padding.
  std::vector<std::vector<int64_t>> random;
  for (int i = 0; i < 2000; i += 32) {
    std::vector<int64_t> b;
    for (int j = i; j < std::min(2000, i + 32); ++j) b.push_back(j);
    random.push_back(b);
  }
  const double bucketed = padded_fraction(s.epoch(0));
  EXPECT_GT(padded_fraction(random), 0.3);
  EXPECT_LT(bucketed, 0.05);
}

TEST(BucketBatchSampler, ShardsAreDisjointAndEqual) {
  auto lengths = random_lengths(1001, 4);
  std::set<int64_t> all;
  size_t count = 0;
  std::vector<size_t> per_rank;
  for (int r = 0; r < 3; ++r) {
    auto o = opts(10);
    o.rank = r;
    o.world_size = 3;
    BucketBatchSampler s(lengths, o);
    auto mine = s.epoch(7);
    EXPECT_EQ(static_cast<int64_t>(mine.size()), s.batches_per_epoch());
    per_rank.push_back(mine.size());
    for (const auto& b : mine) {
      for (int64_t i : b) all.insert(i);
      count += b.size();
    }
  }
  EXPECT_EQ(per_rank, (std::vector<size_t>{34, 34, 34}));  // 101 batches padded to 102
  EXPECT_EQ(all.size(), 1001u);                            // every item on some rank
  EXPECT_EQ(count, 1001u + 10u);                           // one batch repeated as padding
  auto bad = opts(10);
  bad.rank = 3;
  bad.world_size = 3;
  EXPECT_THROW(BucketBatchSampler(lengths, bad), monoflow::UserError);
}

// The ranks' batches of one step come from neighbouring length ranges, so that they pad to
// the same shape: the longest item of rank 0's and rank 1's batch differ by little, where
// batches dealt out at random differ by hundreds of frames.
TEST(BucketBatchSampler, RanksOfOneStepHaveAlikeLengths) {
  auto lengths = random_lengths(4000, 5);
  auto longest = [&](const std::vector<int64_t>& b) {
    int64_t mx = 0;
    for (int64_t i : b) mx = std::max(mx, lengths[i]);
    return mx;
  };
  std::vector<std::vector<std::vector<int64_t>>> ranks;
  for (int r = 0; r < 2; ++r) {
    auto o = opts(32);
    o.bucket_batches = 32;
    o.rank = r;
    o.world_size = 2;
    ranks.push_back(BucketBatchSampler(lengths, o).epoch(1));
  }
  ASSERT_EQ(ranks[0].size(), ranks[1].size());
  std::vector<int64_t> gaps;
  for (size_t k = 0; k < ranks[0].size(); ++k) gaps.push_back(std::abs(longest(ranks[0][k]) - longest(ranks[1][k])));
  std::sort(gaps.begin(), gaps.end());
  EXPECT_LT(gaps[gaps.size() / 2], 40) << "median gap between the ranks' longest items";
  // Still a shuffled order: consecutive steps are not sorted by length.
  int rising = 0;
  for (size_t k = 1; k < ranks[0].size(); ++k) rising += longest(ranks[0][k]) > longest(ranks[0][k - 1]);
  EXPECT_GT(rising, 10);
  EXPECT_LT(rising, static_cast<int>(ranks[0].size()) - 10);
}

TEST(BucketBatchSampler, WithoutShuffleSortedByLength) {
  auto lengths = random_lengths(100, 5);
  auto o = opts(8);
  o.shuffle = false;
  BucketBatchSampler s(lengths, o);
  auto batches = s.epoch(0);
  EXPECT_EQ(batches, s.epoch(9));
  int64_t prev = 0;
  for (const auto& b : batches) {
    for (int64_t i : b) {
      EXPECT_GE(lengths[i], prev);
      prev = lengths[i];
    }
  }
}

}  // namespace
