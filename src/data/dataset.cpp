#include "data/dataset.h"

#include "common/error.h"
#include "data/audio.h"

namespace monoflow::data {

namespace {

// "" when monotonic alignment can place every token of `item` on its own mel frame, else
// why not. The decoder keeps frames / n_sqz * n_sqz of them; the token count includes the
// blanks of add_blank (2n + 1). Caught here, such an utterance would stop training at the
// step that draws it, and again at that step after every --resume.
std::string alignment_problem(const DatasetItem& item, int n_sqz) {
  const int64_t usable = item.mel_frames / n_sqz * n_sqz;
  const auto tokens = static_cast<int64_t>(item.text.size());
  if (usable >= tokens) return "";
  return "cannot be aligned: its text has " + std::to_string(tokens) +
         " tokens but the audio only " + std::to_string(usable) + " usable mel frames (" +
         std::to_string(item.mel_frames) + " cut to a multiple of model.n_sqz " + std::to_string(n_sqz) +
         "); alignment needs a frame per token: is the text too long for this audio, or the audio cut?";
}

}  // namespace

TtsDataset::TtsDataset(const std::vector<Utterance>& utterances, const DataOptions& options,
                       const TextEncoder& encoder, BadLines& bad)
    : options_(options), mel_(options.mel) {
  if (!options.cache_dir.empty()) cache_ = std::make_unique<FeatureCache>(options.cache_dir, options.mel);
  const bool resample = options.on_rate_mismatch == "resample";
  for (const Utterance& u : utterances) {
    AudioInfo info;
    try {
      info = probe_audio(u.audio_path);
    } catch (const FileError& e) {
      bad.report(u.source, u.line, e.what());
      continue;
    }
    if (info.sample_rate != options.mel.sampling_rate && !resample) {
      bad.report(u.source, u.line,
                 u.audio_path + ": sample rate " + std::to_string(info.sample_rate) +
                     " Hz, expected " + std::to_string(options.mel.sampling_rate) +
                     " Hz (set data.on_rate_mismatch: resample, or convert the file)");
      continue;
    }
    DatasetItem item;
    item.samples = resampled_length(info.frames, info.sample_rate, options.mel.sampling_rate);
    if (item.samples < options.mel.filter_length) {
      bad.report(u.source, u.line,
                 u.audio_path + ": audio of " + std::to_string(item.samples) +
                     " samples is shorter than one frame (filter_length " +
                     std::to_string(options.mel.filter_length) + ")");
      continue;
    }
    item.mel_frames = mel_.num_frames(item.samples);
    if (options.max_mel_frames > 0 && item.mel_frames > options.max_mel_frames) {
      ++stats_.too_long;
      continue;
    }
    if (encoder) {
      try {
        item.text = encoder(u.text);
      } catch (const UserError& e) {
        bad.report(u.source, u.line, std::string("text: ") + e.what());
        continue;
      }
      if (item.text.empty()) {
        bad.report(u.source, u.line, "text encodes to no tokens: '" + u.text + "'");
        continue;
      }
      if (const std::string why = alignment_problem(item, options.n_sqz); !why.empty()) {
        bad.report(u.source, u.line, u.audio_path + ": " + why);
        continue;
      }
    }
    // Decoded once, where no cache entry holds its mel yet (an entry was stored only after this
    // same check passed in compute_mel): NaN/Inf samples would make every batch that draws the
    // utterance non-finite, silence would train the text against nothing.
    try {
      if (!cache_ || !cache_->contains(cache_->key(u.audio_path))) {
        if (const std::string why = audio_content_problem(u.audio_path); !why.empty()) {
          bad.report(u.source, u.line, "utterance '" + u.id + "': " + u.audio_path + ": " + why);
          continue;
        }
      }
    } catch (const FileError& e) {
      bad.report(u.source, u.line, e.what());
      continue;
    }
    item.utterance = u;
    multi_speaker_ = multi_speaker_ || u.speaker >= 0;
    stats_.audio_seconds += static_cast<double>(item.samples) / options.mel.sampling_rate;
    items_.push_back(std::move(item));
  }
  stats_.kept = static_cast<int64_t>(items_.size());
}

std::vector<int64_t> TtsDataset::mel_lengths() const {
  std::vector<int64_t> out;
  out.reserve(items_.size());
  for (const auto& it : items_) out.push_back(it.mel_frames);
  return out;
}

Audio TtsDataset::read_item_audio(size_t i) const {
  const DatasetItem& it = items_.at(i);
  Audio audio = read_audio(it.utterance.audio_path, options_.mel.sampling_rate,
                           options_.on_rate_mismatch == "resample");
  if (static_cast<int64_t>(audio.samples.size()) != it.samples) {
    throw FileError(it.utterance.audio_path, 0,
                    "audio changed since the dataset was read (" +
                        std::to_string(audio.samples.size()) + " samples, expected " +
                        std::to_string(it.samples) + ")");
  }
  if (const std::string why = samples_problem(audio.samples, audio.sample_rate); !why.empty()) {
    throw FileError(it.utterance.audio_path, 0, "utterance '" + it.utterance.id + "' (" + it.utterance.source + ":" +
                                                    std::to_string(it.utterance.line) + "): " + why);
  }
  return audio;
}

torch::Tensor TtsDataset::mel_of(Audio& audio, uint64_t dither_seed) const {
  auto samples = torch::from_blob(audio.samples.data(),
                                  {static_cast<int64_t>(audio.samples.size())}, torch::kFloat32);
  auto wav = mel_.waveform(samples, make_cpu_generator(dither_seed));
  return mel_(wav).contiguous();
}

torch::Tensor TtsDataset::compute_mel(size_t i, uint64_t dither_seed) const {
  Audio audio = read_item_audio(i);
  return mel_of(audio, dither_seed);
}

uint64_t content_seed(const std::vector<float>& samples) {
  return fnv1a64(samples.data(), samples.size() * sizeof(float));
}

torch::Tensor TtsDataset::compute_cached_mel(size_t i) const {
  Audio audio = read_item_audio(i);
  const uint64_t seed = content_seed(audio.samples);
  return mel_of(audio, seed);
}

bool TtsDataset::ensure_cached(size_t i) const {
  TORCH_CHECK(cache_, "ensure_cached: no cache_dir set");
  const std::string key = cache_->key(items_.at(i).utterance.audio_path);
  if (cache_->load(key)) return false;
  cache_->store(key, compute_cached_mel(i));
  return true;
}

Sample TtsDataset::get(size_t i, uint64_t dither_seed) const {
  const DatasetItem& it = items_.at(i);
  Sample s;
  s.id = it.utterance.id;
  s.speaker = it.utterance.speaker;
  s.text = torch::tensor(it.text, torch::kInt64);
  if (cache_) {
    const std::string key = cache_->key(it.utterance.audio_path);
    if (auto hit = cache_->load(key)) {
      s.mel = *hit;
    } else {
      s.mel = compute_cached_mel(i);
      cache_->store(key, s.mel);
    }
  } else {
    s.mel = compute_mel(i, dither_seed);
  }
  if (s.mel.size(1) != it.mel_frames) {
    throw FileError(it.utterance.audio_path, 0,
                    "mel has " + std::to_string(s.mel.size(1)) + " frames, expected " +
                        std::to_string(it.mel_frames) + " (stale cache entry or changed audio)");
  }
  return s;
}

}  // namespace monoflow::data
