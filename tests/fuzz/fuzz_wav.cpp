// Fuzzes the audio reader (data/audio.h, libsndfile + soxr behind it): any bytes given as a
// wav must be read or refused with a FileError naming the file.
#include <cmath>
#include <cstring>

#include "data/audio.h"
#include "fuzz_driver.h"

using namespace monoflow;

namespace {

std::string dir() {
  static const std::string d = fuzz::temp_dir("fuzz_wav");
  return d;
}

std::vector<float> tone(size_t n) {
  std::vector<float> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = 0.5f * static_cast<float>(std::sin(i * 0.07));
  return s;
}

// A file written by write_audio (16-bit PCM; the format from the extension).
std::string encoded(const std::string& ext, size_t frames, int rate, int channels) {
  const std::string path = dir() + "/seed" + ext;
  data::write_audio(path, tone(frames * channels), rate, channels);
  return fuzz::read_bytes(path);
}

void put_le(std::string& s, size_t at, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// A 32-bit float WAV (format 3), which write_audio does not make.
std::string float_wav(size_t frames) {
  std::string s = "RIFF____WAVEfmt ";
  s += std::string(20, '\0');
  put_le(s, 16, 16, 4);
  put_le(s, 20, 3, 2);            // IEEE float
  put_le(s, 22, 1, 2);            // mono
  put_le(s, 24, 22050, 4);
  put_le(s, 28, 22050 * 4, 4);
  put_le(s, 32, 4, 2);
  put_le(s, 34, 32, 2);
  s += "data____";
  put_le(s, 40, static_cast<uint32_t>(frames * 4), 4);
  const auto samples = tone(frames);
  s.append(reinterpret_cast<const char*>(samples.data()), frames * 4);
  put_le(s, 4, static_cast<uint32_t>(s.size() - 8), 4);
  return s;
}

void run(const std::string& input) {
  const std::string path = dir() + "/input.wav";
  fuzz::write_bytes(path, input);
  fuzz::QuietStderr quiet;  // "2 channels, down-mixed" for many inputs
  const data::AudioInfo info = data::probe_audio(path);
  const data::Audio resampled = data::read_audio(path, 22050, /*resample=*/true);
  if (info.sample_rate == 22050) data::read_audio(path, 22050, /*resample=*/false);
  (void)resampled;
}

}  // namespace

int main(int argc, char** argv) {
  fuzz::Target t;
  t.name = "fuzz_wav";
  t.seeds = {encoded(".wav", 2000, 22050, 1), encoded(".wav", 900, 16000, 2), encoded(".wav", 1, 44100, 1),
             encoded(".flac", 1500, 22050, 1), float_wav(700)};
  t.valid_seeds = t.seeds.size();
  // A data chunk that claims far more than the file holds, and a header alone.
  std::string claims = encoded(".wav", 100, 22050, 1);
  put_le(claims, 40, 0x7ffffff0u, 4);
  t.seeds.push_back(claims);
  t.seeds.push_back(encoded(".wav", 0, 22050, 1));
  t.seeds.push_back(claims.substr(0, 44));
  t.dictionary = {"RIFF", "RIFX", "RF64", "WAVE", "fmt ", "data", "LIST", "fact", "cue ", "smpl", "ds64",
                  std::string("\xff\xff\xff\xff", 4), std::string("\0\0\0\0", 4), std::string("\x01\x00", 2),
                  std::string("\x03\x00", 2), std::string("\xfe\xff", 2), "fLaC", "OggS"};
  t.run = run;
  t.fixed_cases = [] {
    fuzz::expect_user_error([] { data::read_audio(dir(), 22050, true); }, "a directory as the wav");
    fuzz::expect_user_error([] { data::probe_audio(dir() + "/missing.wav"); }, "a missing wav");
  };
  return fuzz::fuzz_main(argc, argv, t);
}
