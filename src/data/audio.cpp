#include "data/audio.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <mutex>

#include "common/error.h"

namespace monoflow::data {

namespace {

struct SndCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndPtr = std::unique_ptr<SNDFILE, SndCloser>;

SndPtr open_read(const std::string& path, SF_INFO* info) {
  *info = SF_INFO{};
  SndPtr f(sf_open(path.c_str(), SFM_READ, info));
  if (!f) {
    throw FileError(path, 0, std::string("cannot read audio: ") + sf_strerror(nullptr) +
                                 " (is the path right and the file a wav/flac/ogg?)");
  }
  return f;
}

void warn(const std::string& msg) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << "warning: " << msg << "\n";
}

}  // namespace

AudioInfo probe_audio(const std::string& path) {
  SF_INFO info;
  SndPtr f = open_read(path, &info);
  return {static_cast<int64_t>(info.frames), info.samplerate, info.channels};
}

int64_t resampled_length(int64_t frames, int from_rate, int to_rate) {
  if (from_rate == to_rate) return frames;
  return static_cast<int64_t>(
      std::llround(static_cast<double>(frames) * to_rate / static_cast<double>(from_rate)));
}

Audio read_audio(const std::string& path, int target_rate, bool resample) {
  SF_INFO info;
  SndPtr f = open_read(path, &info);
  if (info.samplerate != target_rate && !resample) {
    throw FileError(path, 0,
                    "sample rate " + std::to_string(info.samplerate) + " Hz, expected " +
                        std::to_string(target_rate) +
                        " Hz (set data.on_rate_mismatch: resample, or convert the file)");
  }
  const int64_t frames = info.frames;
  const int ch = info.channels;
  std::vector<float> inter(static_cast<size_t>(frames) * ch);
  const sf_count_t got = sf_readf_float(f.get(), inter.data(), frames);
  if (got != frames) {
    throw FileError(path, 0,
                    "truncated audio: read " + std::to_string(got) + " of " +
                        std::to_string(frames) + " frames");
  }
  Audio out;
  out.source_rate = info.samplerate;
  out.source_channels = ch;
  out.sample_rate = target_rate;
  std::vector<float> mono;
  if (ch == 1) {
    mono = std::move(inter);
  } else {
    warn(path + ": " + std::to_string(ch) + " channels, down-mixed to mono (channel average)");
    mono.resize(frames);
    for (int64_t i = 0; i < frames; ++i) {
      double sum = 0;
      for (int c = 0; c < ch; ++c) sum += inter[i * ch + c];
      mono[i] = static_cast<float>(sum / ch);
    }
  }
  if (info.samplerate == target_rate) {
    out.samples = std::move(mono);
    return out;
  }
  const int64_t olen = resampled_length(frames, info.samplerate, target_rate);
  out.samples.assign(olen, 0.0f);
  size_t idone = 0, odone = 0;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
  soxr_error_t err = soxr_oneshot(info.samplerate, target_rate, 1, mono.data(), mono.size(),
                                  &idone, out.samples.data(), out.samples.size(), &odone, &io,
                                  &q, nullptr);
  if (err) throw FileError(path, 0, std::string("resampling failed: ") + err);
  // soxr may deliver a few samples less than the rounded length; the rest stays zero so that
  // the length matches resampled_length() (and the mel length predicted from the header).
  return out;
}

void write_audio(const std::string& path, const std::vector<float>& samples, int sample_rate,
                 int channels) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  const auto ext = path.substr(path.find_last_of('.') + 1);
  if (ext == "flac") {
    info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
  } else if (ext == "ogg") {
    info.format = SF_FORMAT_OGG | SF_FORMAT_VORBIS;
  } else {
    info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  }
  SndPtr f(sf_open(path.c_str(), SFM_WRITE, &info));
  if (!f) throw FileError(path, 0, std::string("cannot write audio: ") + sf_strerror(nullptr));
  // Quantised here (round(x * 32768), clipped) so that reading back gives exactly x for every
  // x on the int16 grid: libsndfile reads int16 as v / 32768.
  std::vector<short> pcm(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const double v = std::nearbyint(static_cast<double>(samples[i]) * 32768.0);
    pcm[i] = static_cast<short>(std::max(-32768.0, std::min(32767.0, v)));
  }
  const sf_count_t frames = static_cast<sf_count_t>(samples.size() / channels);
  if (sf_writef_short(f.get(), pcm.data(), frames) != frames) {
    throw FileError(path, 0, "short write");
  }
}

}  // namespace monoflow::data
