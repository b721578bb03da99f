#include "data/audio.h"

#include <sndfile.h>
#include <soxr.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>

#include "common/error.h"
#include "common/input_file.h"

namespace monoflow::data {

namespace {

struct SndCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndPtr = std::unique_ptr<SNDFILE, SndCloser>;

// A read-only descriptor behind libsndfile's virtual I/O: read_audio opens the file itself
// (common/input_file.h: a FIFO or a device is refused instead of blocking) and keeps the
// descriptor's ownership, whatever sf_open_virtual does on failure.
struct FdFile {
  int fd = -1;
  ~FdFile() {
    if (fd >= 0) ::close(fd);
  }
};
sf_count_t fd_length(void* user) {
  struct stat st {};
  return ::fstat(static_cast<FdFile*>(user)->fd, &st) == 0 ? static_cast<sf_count_t>(st.st_size) : 0;
}
sf_count_t fd_seek(sf_count_t offset, int whence, void* user) {
  return ::lseek(static_cast<FdFile*>(user)->fd, offset, whence);
}
sf_count_t fd_read(void* ptr, sf_count_t count, void* user) {
  sf_count_t done = 0;
  while (done < count) {
    const ssize_t n = ::read(static_cast<FdFile*>(user)->fd, static_cast<char*>(ptr) + done,
                             static_cast<size_t>(count - done));
    if (n > 0) {
      done += n;
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  return done;
}
sf_count_t fd_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t fd_tell(void* user) { return ::lseek(static_cast<FdFile*>(user)->fd, 0, SEEK_CUR); }

// A growable byte buffer behind libsndfile's virtual I/O (writes may seek back to the header).
struct MemoryFile {
  std::string bytes;
  sf_count_t pos = 0;
};
sf_count_t memory_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }
sf_count_t memory_seek(sf_count_t offset, int whence, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  const sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? memory_length(user) : 0;
  m->pos = std::max<sf_count_t>(0, base + offset);
  return m->pos;
}
sf_count_t memory_read(void* ptr, sf_count_t count, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  const sf_count_t n = std::max<sf_count_t>(0, std::min(count, memory_length(user) - m->pos));
  if (n > 0) std::memcpy(ptr, m->bytes.data() + m->pos, static_cast<size_t>(n));
  m->pos += n;
  return n;
}
sf_count_t memory_write(const void* ptr, sf_count_t count, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  if (m->pos + count > memory_length(user)) m->bytes.resize(static_cast<size_t>(m->pos + count));
  std::memcpy(&m->bytes[static_cast<size_t>(m->pos)], ptr, static_cast<size_t>(count));
  m->pos += count;
  return count;
}
sf_count_t memory_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

// The sample rates read_audio takes. A header's rate is any 32-bit number: resampling from
// 393 MHz crashed soxr (the fuzzer's find) and from 1 Hz would ask for 22050 times the samples.
constexpr int kMinRate = 1000, kMaxRate = 768000;

// `file` must outlive the returned handle.
SndPtr open_read(const std::string& path, SF_INFO* info, FdFile& file) {
  *info = SF_INFO{};
  file.fd = open_input_file(path, "audio must be a wav/flac/ogg file");
  if (file.fd < 0) {
    throw FileError(path, 0, std::string("cannot read audio: ") + std::strerror(errno) +
                                 " (is the path right and the file a wav/flac/ogg?)");
  }
  static SF_VIRTUAL_IO io{fd_length, fd_seek, fd_read, fd_write, fd_tell};
  SndPtr f(sf_open_virtual(&io, SFM_READ, info, &file));
  if (!f) {
    throw FileError(path, 0, std::string("cannot read audio: ") + sf_strerror(nullptr) +
                                 " (is the path right and the file a wav/flac/ogg?)");
  }
  if (info->samplerate < kMinRate || info->samplerate > kMaxRate || info->channels < 1 || info->frames < 0) {
    throw FileError(path, 0, "its header states " + std::to_string(info->samplerate) + " Hz, " +
                                 std::to_string(info->channels) + " channel(s) and " + std::to_string(info->frames) +
                                 " frames; a damaged header? (rates from " + std::to_string(kMinRate) + " to " +
                                 std::to_string(kMaxRate) + " Hz are read)");
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
  FdFile file;
  SndPtr f = open_read(path, &info, file);
  return {static_cast<int64_t>(info.frames), info.samplerate, info.channels};
}

namespace {

// Non-finite samples and the peak of the finite ones, over consecutive blocks of samples.
struct SampleScan {
  size_t non_finite = 0;
  size_t first = 0;  // index of the first non-finite sample
  size_t seen = 0;
  float peak = 0;

  void add(const float* samples, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const float v = samples[i];
      if (std::isfinite(v)) {
        peak = std::max(peak, std::abs(v));
      } else if (non_finite++ == 0) {
        first = seen + i;
      }
    }
    seen += n;
  }
  // `per_second`: samples per second (rate x channels for interleaved frames).
  std::string problem(double per_second) const {
    char text[200];
    if (non_finite > 0) {
      std::snprintf(text, sizeof text, "%zu NaN/Inf sample(s), the first at %.3f s: its mel would not be finite",
                    non_finite, static_cast<double>(first) / per_second);
      return text;
    }
    if (peak < kSilentPeak) {
      std::snprintf(text, sizeof text, "silent: no sample reaches one 16-bit step (peak %.3g); an empty recording?",
                    static_cast<double>(peak));
      return text;
    }
    return "";
  }
};

}  // namespace

std::string samples_problem(const std::vector<float>& samples, int rate) {
  SampleScan scan;
  scan.add(samples.data(), samples.size());
  return scan.problem(rate);
}

std::string audio_content_problem(const std::string& path) {
  SF_INFO info;
  FdFile file;
  SndPtr f = open_read(path, &info, file);
  // libsndfile scales integer formats to [-1, 1); float formats come through as stored, NaN and
  // Inf included. Interleaved channels are scanned alike.
  constexpr sf_count_t kBlock = 1 << 15;
  std::vector<float> block(static_cast<size_t>(kBlock) * info.channels);
  SampleScan scan;
  for (sf_count_t n; (n = sf_readf_float(f.get(), block.data(), kBlock)) > 0;) {
    scan.add(block.data(), static_cast<size_t>(n) * info.channels);
  }
  return scan.problem(static_cast<double>(info.samplerate) * info.channels);
}

int64_t resampled_length(int64_t frames, int from_rate, int to_rate) {
  if (from_rate == to_rate) return frames;
  return static_cast<int64_t>(
      std::llround(static_cast<double>(frames) * to_rate / static_cast<double>(from_rate)));
}

Audio read_audio(const std::string& path, int target_rate, bool resample) {
  SF_INFO info;
  FdFile file;
  SndPtr f = open_read(path, &info, file);
  if (info.samplerate != target_rate && !resample) {
    throw FileError(path, 0,
                    "sample rate " + std::to_string(info.samplerate) + " Hz, expected " +
                        std::to_string(target_rate) +
                        " Hz (set data.on_rate_mismatch: resample, or convert the file)");
  }
  const int64_t frames = info.frames;
  const int ch = info.channels;
  // Read in blocks rather than allocating what the header states: a 779-byte FLAC whose header
  // claims billions of samples made this a std::bad_alloc (the fuzzer's find).
  constexpr sf_count_t kBlock = 1 << 16;
  std::vector<float> inter;
  sf_count_t got = 0;
  while (got < frames) {
    const sf_count_t want = std::min<sf_count_t>(kBlock, frames - got);
    inter.resize(static_cast<size_t>(got + want) * ch);
    const sf_count_t n = sf_readf_float(f.get(), inter.data() + static_cast<size_t>(got) * ch, want);
    got += std::max<sf_count_t>(n, 0);
    if (n < want) break;
  }
  inter.resize(static_cast<size_t>(got) * ch);
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
  if (olen == 0 || mono.empty()) return out;  // soxr would be handed a null buffer
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

std::string wav_pcm16_bytes(const std::vector<int16_t>& pcm, int sample_rate) {
  SF_VIRTUAL_IO io{memory_length, memory_seek, memory_read, memory_write, memory_tell};
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  MemoryFile file;
  {
    SndPtr f(sf_open_virtual(&io, SFM_WRITE, &info, &file));
    if (!f) throw UserError(std::string("cannot encode a WAV file: ") + sf_strerror(nullptr));
    const auto frames = static_cast<sf_count_t>(pcm.size());
    if (sf_write_short(f.get(), pcm.data(), frames) != frames) throw UserError("cannot encode a WAV file: short write");
  }  // sf_close writes the final sizes into the header
  return std::move(file.bytes);
}

}  // namespace monoflow::data
