#include "data/cache_fill.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "data/feature_cache.h"
#include "data/serial_ops.h"

namespace monoflow::data {

CacheFillResult fill_feature_cache(const std::vector<const TtsDataset*>& datasets, const CacheFillOptions& options) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<const TtsDataset*, size_t>> work;
  CacheFillResult result;
  for (const auto* ds : datasets) {
    if (!ds) continue;
    for (size_t i = 0; i < ds->size(); ++i) work.emplace_back(ds, i);
    result.audio_seconds += ds->stats().audio_seconds;
  }
  std::atomic<size_t> next{0}, done{0}, computed{0};
  std::atomic<int64_t> audio_samples{0};
  std::exception_ptr error;
  std::mutex error_mu;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options.jobs); ++t) {
    threads.emplace_back([&] {
      SerialTorchOps serial;  // one utterance per thread; no intra-op threads on top
      for (size_t k; (k = next++) < work.size();) {
        const auto& [ds, i] = work[k];
        try {
          const auto* cache = ds->cache();
          if (options.force) {
            const auto key = cache->key(ds->item(i).utterance.audio_path);
            cache->store(key, ds->compute_cached_mel(i));
            ++computed;
          } else if (ds->ensure_cached(i)) {
            ++computed;
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
          next = work.size();
        }
        audio_samples += ds->item(i).samples;
        ++done;
      }
    });
  }
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  auto has_error = [&] {
    std::lock_guard<std::mutex> lock(error_mu);
    return static_cast<bool>(error);
  };
  while (done < work.size() && !has_error()) {
    if (options.on_progress) options.on_progress({done, work.size(), audio_samples.load(), elapsed()});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  result.utterances = work.size();
  result.computed = computed.load();
  result.elapsed_s = elapsed();
  return result;
}

}  // namespace monoflow::data
