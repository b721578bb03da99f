// Audio input: libsndfile reads (wav, flac, ogg, ...), down-mix to mono, soxr resampling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace monoflow::data {

struct AudioInfo {
  int64_t frames = 0;  // samples per channel
  int sample_rate = 0;
  int channels = 0;
};

// Reads the header only. Throws FileError(path) when the file is missing or unreadable, or not
// a regular file (a FIFO or a device would block the read: common/input_file.h).
AudioInfo probe_audio(const std::string& path);

// Below this peak (one 16-bit step) audio counts as silent.
constexpr float kSilentPeak = 1.0f / 32768.0f;

// "" when the samples can make a mel, else what is wrong with them: NaN/Inf samples (a float
// wav; the mel and every loss of its batches would not be finite), or silence (no sample
// reaches kSilentPeak). `rate` places the first bad sample in seconds.
std::string samples_problem(const std::vector<float>& samples, int rate);

// samples_problem of the whole file, decoded as stored (no resampling). Throws as probe_audio.
std::string audio_content_problem(const std::string& path);

// Samples per channel after resampling `frames` from `from_rate` to `to_rate` (what
// read_audio returns; used to predict mel lengths without decoding).
int64_t resampled_length(int64_t frames, int from_rate, int to_rate);

struct Audio {
  std::vector<float> samples;  // mono, libsndfile's normalised scale: int16 value / 32768
  int sample_rate = 0;
  int source_rate = 0;
  int source_channels = 0;
};

// Reads the whole file, averages channels to mono (a warning is printed to stderr once per
// file), and resamples to `target_rate` with soxr (high quality) when `resample` is true.
// Throws FileError(path) when the file is missing/unreadable, or when its rate differs from
// target_rate and resample is false.
Audio read_audio(const std::string& path, int target_rate, bool resample);

// Writes mono 16-bit PCM (format from the extension: .wav, .flac, .ogg). For tests and tools.
void write_audio(const std::string& path, const std::vector<float>& samples, int sample_rate,
                 int channels = 1);

// A mono 16-bit PCM WAV file in memory (libsndfile, canonical 44-byte header): the samples as
// given, no scaling. For TensorBoard audio and synthesized files.
std::string wav_pcm16_bytes(const std::vector<int16_t>& pcm, int sample_rate);

}  // namespace monoflow::data
