#include "data/options.h"

#include <sstream>

#include "common/checks.h"

namespace monoflow::data {

using check::at_least;
using check::positive;
using check::require;

std::string MelOptions::settings_key() const {
  std::ostringstream s;
  s.precision(17);
  s << "sr=" << sampling_rate << ";n_fft=" << filter_length << ";hop=" << hop_length
    << ";win=" << win_length << ";mels=" << n_mel_channels << ";fmin=" << mel_fmin
    << ";fmax=" << mel_fmax << ";max_wav=" << max_wav_value << ";noise=" << add_noise
    << ";recipe=glow-tts-v1";
  return s.str();
}

void MelOptions::validate() const {
  require("data.max_wav_value", positive(max_wav_value));
  require("data.sampling_rate", positive(sampling_rate));
  require("data.filter_length", positive(filter_length));
  require("data.hop_length", positive(hop_length));
  require("data.win_length", positive(win_length));
  require("data.n_mel_channels", positive(n_mel_channels));
  require("data.mel_fmin", at_least(mel_fmin, 0.0));
  require("data.mel_fmax", positive(mel_fmax));
  require(win_length <= filter_length, "data.win_length",
          "must not exceed data.filter_length (" + std::to_string(filter_length) + ")");
  require(mel_fmax <= sampling_rate / 2.0, "data.mel_fmax",
          "must not exceed half of data.sampling_rate (" + std::to_string(sampling_rate / 2) + " Hz)");
  require(mel_fmin < mel_fmax, "data.mel_fmin", "must be below data.mel_fmax");
}

void DataOptions::validate() const {
  mel.validate();
  require("data.n_speakers", at_least(n_speakers, 0));
  require("data.validation_size", at_least(validation_size, 0));
  require("data.on_bad_line", check::one_of(on_bad_line, {"skip", "error"}));
  require("data.on_rate_mismatch", check::one_of(on_rate_mismatch, {"resample", "error"}));
  require("data.max_mel_frames", at_least(max_mel_frames, 0));
  require("model.n_sqz", at_least(n_sqz, 1));
  require(!dataset_dir.empty() || !training_files.empty(), "data.dataset_dir",
          "no training data: set data.dataset_dir (a folder with metadata.csv and wavs/) or "
          "data.training_files (a filelist)");
}

void LoaderOptions::validate() const {
  require("train.batch_size", positive(batch_size));
  require("data.num_workers", at_least(num_workers, 0));
  require("data.prefetch_batches", positive(prefetch_batches));
  require("loader.bucket_batches", positive(bucket_batches));
}

}  // namespace monoflow::data
