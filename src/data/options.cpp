#include "data/options.h"

#include <sstream>

#include "common/error.h"

namespace monoflow::data {

std::string MelOptions::settings_key() const {
  std::ostringstream s;
  s.precision(17);
  s << "sr=" << sampling_rate << ";n_fft=" << filter_length << ";hop=" << hop_length
    << ";win=" << win_length << ";mels=" << n_mel_channels << ";fmin=" << mel_fmin
    << ";fmax=" << mel_fmax << ";max_wav=" << max_wav_value << ";noise=" << add_noise
    << ";recipe=glow-tts-v1";
  return s.str();
}

MelOptions DataOptions::mel() const {
  MelOptions m;
  m.sampling_rate = sampling_rate;
  m.filter_length = filter_length;
  m.hop_length = hop_length;
  m.win_length = win_length;
  m.n_mel_channels = n_mel_channels;
  m.mel_fmin = mel_fmin;
  m.mel_fmax = mel_fmax;
  m.max_wav_value = max_wav_value;
  m.add_noise = add_noise;
  return m;
}

namespace {
void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw UserError("data." + key + ": " + what);
}
}  // namespace

void DataOptions::validate() const {
  require(sampling_rate > 0, "sampling_rate", "must be positive");
  require(filter_length > 0, "filter_length", "must be positive");
  require(hop_length > 0, "hop_length", "must be positive");
  require(win_length > 0 && win_length <= filter_length, "win_length",
          "must be positive and at most filter_length");
  require(n_mel_channels > 0, "n_mel_channels", "must be positive");
  require(mel_fmin >= 0 && mel_fmax > mel_fmin && mel_fmax <= sampling_rate / 2.0, "mel_fmax",
          "need 0 <= mel_fmin < mel_fmax <= sampling_rate/2");
  require(max_wav_value > 0, "max_wav_value", "must be positive");
  require(on_bad_line == "skip" || on_bad_line == "error", "on_bad_line",
          "'" + on_bad_line + "' is not one of skip | error");
  require(on_rate_mismatch == "resample" || on_rate_mismatch == "error", "on_rate_mismatch",
          "'" + on_rate_mismatch + "' is not one of resample | error");
  require(validation_size >= 0, "validation_size", "must not be negative");
  require(n_sqz >= 1, "n_sqz", "must be at least 1 (model.n_sqz)");
  require(max_mel_frames >= 0, "max_mel_frames", "must not be negative (0: no limit)");
  require(!dataset_dir.empty() || !training_files.empty(), "dataset_dir",
          "set dataset_dir (LJSpeech layout) or training_files (a filelist)");
}

}  // namespace monoflow::data
