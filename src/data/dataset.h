// A validated set of utterances that yields Samples (token ids + mel) by index.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/feature_cache.h"
#include "data/manifest.h"
#include "data/mel.h"
#include "data/options.h"

namespace monoflow::data {

// Text -> token ids (the text front-end's TextProcessor::encode). It may throw UserError for
// text it cannot encode; that line is then reported as bad. Called on one thread only.
using TextEncoder = std::function<std::vector<int64_t>(const std::string&)>;

struct DatasetItem {
  Utterance utterance;
  std::vector<int64_t> text;  // token ids
  int64_t samples = 0;        // at sampling_rate, after resampling
  int64_t mel_frames = 0;     // 1 + samples / hop_length
};

struct DatasetStats {
  int64_t kept = 0;
  int64_t too_long = 0;     // left out by max_mel_frames
  double audio_seconds = 0; // of the kept items
};

class TtsDataset {
 public:
  // Checks every utterance before anything is batched: audio readable (header), sample rate
  // (when on_rate_mismatch is error), at least filter_length samples, text encodes to at least
  // one token, at least one usable mel frame per token (frames cut to a multiple of n_sqz).
  // Failures go to `bad` with the manifest's file and line. Utterances longer than
  // max_mel_frames are left out and counted. A FeatureCache is used when cache_dir is set.
  TtsDataset(const std::vector<Utterance>& utterances, const DataOptions& options,
             const TextEncoder& encoder, BadLines& bad);

  size_t size() const { return items_.size(); }
  const DatasetItem& item(size_t i) const { return items_.at(i); }
  std::vector<int64_t> mel_lengths() const;
  const DatasetStats& stats() const { return stats_; }
  bool multi_speaker() const { return multi_speaker_; }
  const MelSpectrogram& mel_spectrogram() const { return mel_; }
  const FeatureCache* cache() const { return cache_.get(); }

  // The sample of item i. The mel comes from the cache when present (computed and stored on a
  // miss; its dither is then seeded by the cache key, i.e. fixed per utterance), otherwise it
  // is computed with dither seeded by `dither_seed`. Thread-safe. Throws FileError when the
  // audio changed or vanished since construction.
  Sample get(size_t i, uint64_t dither_seed) const;

  // The mel of item i computed from its audio (no cache). Thread-safe.
  torch::Tensor compute_mel(size_t i, uint64_t dither_seed) const;

  // Fills the cache entry of item i if missing; returns true when it computed one.
  bool ensure_cached(size_t i) const;

 private:
  DataOptions options_;
  MelSpectrogram mel_;
  std::unique_ptr<FeatureCache> cache_;
  std::vector<DatasetItem> items_;
  DatasetStats stats_;
  bool multi_speaker_ = false;
};

}  // namespace monoflow::data
