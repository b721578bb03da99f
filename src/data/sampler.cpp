#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace monoflow::data {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Fisher-Yates with explicit draws (std::shuffle differs between standard libraries).
template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng() % i]);
}
}  // namespace

uint64_t mix_seed(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

BucketBatchSampler::BucketBatchSampler(std::vector<int64_t> lengths, const LoaderOptions& options)
    : lengths_(std::move(lengths)), options_(options) {
  options.validate();
  if (options.world_size <= 0 || options.rank < 0 || options.rank >= options.world_size) {
    throw UserError("distributed: rank " + std::to_string(options.rank) +
                    " is not in [0, world_size=" + std::to_string(options.world_size) + ")");
  }
  const int64_t n = static_cast<int64_t>(lengths_.size());
  const int64_t b = options.batch_size;
  global_ = options.drop_last ? n / b : (n + b - 1) / b;
  const int64_t w = options.world_size;
  if (options.shuffle) {
    per_rank_ = (global_ + w - 1) / w;
  } else {
    per_rank_ = global_ > options.rank ? (global_ - options.rank + w - 1) / w : 0;
  }
  if (global_ > 0 && per_rank_ == 0 && options.shuffle) per_rank_ = 1;
}

std::vector<std::vector<int64_t>> BucketBatchSampler::global_batches(int64_t epoch) const {
  const int64_t n = static_cast<int64_t>(lengths_.size());
  const int64_t b = options_.batch_size;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto by_length = [&](int64_t x, int64_t y) { return lengths_[x] < lengths_[y]; };
  std::mt19937_64 rng(mix_seed(static_cast<uint64_t>(options_.seed), static_cast<uint64_t>(epoch)));
  if (options_.shuffle) {
    shuffle(order, rng);
    const int64_t window = b * options_.bucket_batches;
    for (int64_t s = 0; s < n; s += window) {
      std::stable_sort(order.begin() + s, order.begin() + std::min(n, s + window), by_length);
    }
  } else {
    std::stable_sort(order.begin(), order.end(), by_length);
  }
  std::vector<std::vector<int64_t>> batches;
  for (int64_t s = 0; s < n; s += b) {
    if (options_.drop_last && s + b > n) break;
    batches.emplace_back(order.begin() + s, order.begin() + std::min(n, s + b));
  }
  if (!options_.shuffle || batches.empty()) return batches;
  // The ranks' batches of one step are W neighbours in length order, so that they pad to
  // the same shape and no rank waits for a longer one; the steps are shuffled. Padded to a
  // multiple of W by repeating the first batches, so that every rank has as many.
  const int64_t w = options_.world_size, have = static_cast<int64_t>(batches.size());
  for (int64_t i = have; i < per_rank_ * w; ++i) batches.push_back(batches[(i - have) % have]);
  std::vector<int64_t> steps(per_rank_);
  std::iota(steps.begin(), steps.end(), 0);
  shuffle(steps, rng);
  std::vector<std::vector<int64_t>> shuffled;
  for (const int64_t k : steps) {
    for (int64_t r = 0; r < w; ++r) shuffled.push_back(std::move(batches[k * w + r]));
  }
  return shuffled;
}

std::vector<std::vector<int64_t>> BucketBatchSampler::epoch(int64_t epoch) const {
  auto all = global_batches(epoch);
  const int64_t w = options_.world_size;
  std::vector<std::vector<int64_t>> mine;
  for (int64_t i = options_.rank; i < static_cast<int64_t>(all.size()); i += w) {
    mine.push_back(std::move(all[i]));
  }
  return mine;
}

}  // namespace monoflow::data
