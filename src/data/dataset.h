// A validated set of utterances that yields Samples (token ids + mel) by index.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/audio.h"
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

// The dither seed of a cached mel: 64-bit FNV-1a of the samples' bytes.
uint64_t content_seed(const std::vector<float>& samples);

class TtsDataset {
 public:
  // Checks every utterance before anything is batched: audio readable (header; a regular file,
  // not a FIFO or a device), sample rate (when on_rate_mismatch is error), at least
  // filter_length samples, text encodes to at least one token, at least one usable mel frame per
  // token (frames cut to a multiple of n_sqz), and, unless the cache holds its mel already,
  // samples that are finite and not silent (decoded once: audio_content_problem).
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

  // The sample of item i. The mel comes from the cache when present (computed by
  // compute_cached_mel and stored on a miss), otherwise it is computed with dither seeded by
  // `dither_seed`. Thread-safe. Throws FileError when the audio changed or vanished since
  // construction, or its samples are not finite or silent.
  Sample get(size_t i, uint64_t dither_seed) const;

  // The mel of item i computed from its audio (no cache). Thread-safe.
  torch::Tensor compute_mel(size_t i, uint64_t dither_seed) const;

  // The mel the cache holds for item i: its dither seeded by the decoded samples
  // (content_seed), so that the mel is a function of the audio and the settings only, not of
  // the file's path, size or modification time: a corpus copied elsewhere, or touched, caches
  // and trains the same bits. Thread-safe.
  torch::Tensor compute_cached_mel(size_t i) const;

  // Fills the cache entry of item i if missing; returns true when it computed one.
  bool ensure_cached(size_t i) const;

 private:
  Audio read_item_audio(size_t i) const;  // decoded, resampled, length and content checked
  torch::Tensor mel_of(Audio& audio, uint64_t dither_seed) const;

  DataOptions options_;
  MelSpectrogram mel_;
  std::unique_ptr<FeatureCache> cache_;
  std::vector<DatasetItem> items_;
  DatasetStats stats_;
  bool multi_speaker_ = false;
};

}  // namespace monoflow::data
