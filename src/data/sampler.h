// Length-bucketed batch sampler: similar lengths share a batch, batch order shuffled per epoch.
#pragma once

#include <cstdint>
#include <vector>

#include "data/options.h"

namespace monoflow::data {

class BucketBatchSampler {
 public:
  // lengths: one per dataset item (mel frames). Uses batch_size, seed, shuffle, drop_last,
  // bucket_batches, rank and world_size from `options`.
  BucketBatchSampler(std::vector<int64_t> lengths, const LoaderOptions& options);

  // This rank's batches (dataset indices) of `epoch`; a pure function of (seed, epoch).
  // shuffle: items are shuffled, sorted by length within windows of bucket_batches batches,
  // cut into batches, and the batches shuffled. Without shuffle: one global length sort, fixed.
  // With world_size > 1 every rank gets batch r, r + W, ...; when shuffling, the W batches of
  // one step are neighbours in length (what they pad to is alike) and the batch list is
  // padded by repeating its head so that all ranks get the same number of batches.
  std::vector<std::vector<int64_t>> epoch(int64_t epoch) const;

  int64_t batches_per_epoch() const { return per_rank_; }

 private:
  std::vector<std::vector<int64_t>> global_batches(int64_t epoch) const;
  std::vector<int64_t> lengths_;
  LoaderOptions options_;
  int64_t global_ = 0;
  int64_t per_rank_ = 0;
};

// splitmix64: mixes seeds (epoch, item) into independent streams.
uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace monoflow::data
