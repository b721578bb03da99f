#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "common/error.h"
#include "data/audio.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using monoflow::data::testing::expect_file_error;
using monoflow::data::testing::TempDir;
using monoflow::data::testing::tone;

TEST(Audio, ReadsInt16WavExactly) {
  TempDir dir;
  auto x = tone(5000, 440.0, 22050);
  write_audio(dir / "a.wav", x, 22050);
  auto info = probe_audio(dir / "a.wav");
  EXPECT_EQ(info.frames, 5000);
  EXPECT_EQ(info.sample_rate, 22050);
  EXPECT_EQ(info.channels, 1);
  auto a = read_audio(dir / "a.wav", 22050, true);
  EXPECT_EQ(a.samples, x);
  EXPECT_EQ(a.sample_rate, 22050);
  EXPECT_EQ(a.source_channels, 1);
}

TEST(Audio, ReadsFlacExactlyAndOgg) {
  TempDir dir;
  auto x = tone(8000, 300.0, 22050);
  write_audio(dir / "a.flac", x, 22050);
  EXPECT_EQ(read_audio(dir / "a.flac", 22050, false).samples, x);
  write_audio(dir / "a.ogg", x, 22050);
  auto ogg = read_audio(dir / "a.ogg", 22050, false);
  ASSERT_EQ(ogg.samples.size(), x.size());
  double err = 0, energy = 0;
  for (size_t i = 1000; i < x.size() - 1000; ++i) {
    err += (ogg.samples[i] - x[i]) * (ogg.samples[i] - x[i]);
    energy += x[i] * x[i];
  }
  EXPECT_LT(err / energy, 0.01);  // lossy codec: within 20 dB of the original
}

TEST(Audio, DownmixesChannelsToTheirMean) {
  TempDir dir;
  auto l = tone(3000, 440.0, 22050, 0.5);
  auto r = tone(3000, 660.0, 22050, 0.25);
  std::vector<float> inter;
  for (size_t i = 0; i < l.size(); ++i) {
    inter.push_back(l[i]);
    inter.push_back(r[i]);
  }
  write_audio(dir / "s.wav", inter, 22050, 2);
  auto a = read_audio(dir / "s.wav", 22050, false);
  EXPECT_EQ(a.source_channels, 2);
  ASSERT_EQ(a.samples.size(), l.size());
  for (size_t i = 0; i < l.size(); ++i) ASSERT_FLOAT_EQ(a.samples[i], (l[i] + r[i]) / 2) << i;
}

TEST(Audio, ResamplesWithSoxr) {
  TempDir dir;
  auto x = tone(44100, 440.0, 44100);  // one second at 44.1 kHz
  write_audio(dir / "hi.wav", x, 44100);
  auto a = read_audio(dir / "hi.wav", 22050, true);
  EXPECT_EQ(a.source_rate, 44100);
  EXPECT_EQ(a.sample_rate, 22050);
  ASSERT_EQ(static_cast<int64_t>(a.samples.size()), resampled_length(44100, 44100, 22050));
  ASSERT_EQ(a.samples.size(), 22050u);
  // Away from the edges the result is the same tone sampled at 22.05 kHz.
  auto ideal = tone(22050, 440.0, 22050);
  double max_err = 0;
  for (size_t i = 500; i < 21500; ++i) max_err = std::max(max_err, double(std::abs(a.samples[i] - ideal[i])));
  EXPECT_LT(max_err, 2e-3);
  EXPECT_EQ(resampled_length(16000, 16000, 22050), 22050);
  EXPECT_EQ(resampled_length(1001, 48000, 22050), 460);  // round(459.84)
}

TEST(Audio, RateMismatchRejectedWhenResamplingIsOff) {
  TempDir dir;
  write_audio(dir / "16k.wav", tone(1600, 440.0, 16000), 16000);
  try {
    read_audio(dir / "16k.wav", 22050, false);
    FAIL() << "expected FileError";
  } catch (const monoflow::FileError& e) {
    EXPECT_EQ(e.file(), dir / "16k.wav");
    EXPECT_NE(std::string(e.what()).find("16000"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("on_rate_mismatch"), std::string::npos);
  }
}

TEST(Audio, MissingOrGarbageFileIsAFileError) {
  TempDir dir;
  EXPECT_THROW(probe_audio(dir / "missing.wav"), monoflow::FileError);
  monoflow::data::testing::write_text(dir / "junk.wav", "this is not audio at all, just text");
  expect_file_error([&] { read_audio(dir / "junk.wav", 22050, true); }, dir / "junk.wav", -1, "");
}

// Found by fuzz_wav: a header stating 393 MHz crashed soxr; a file too short to give one
// sample after resampling handed soxr a null buffer.
TEST(Audio, AnAbsurdRateIsAFileErrorAndATooShortFileResamplesToNothing) {
  TempDir dir;
  // 44-byte PCM16 mono header with rate 0x1777ac44, one sample.
  std::string wav("RIFF\x26\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\x44\xac\x77\x17\xfc\x3c\x01\0\x02\0\x10\0"
                  "data\x02\0\0\0\0\0", 46);
  monoflow::data::testing::write_text(dir / "fast.wav", wav);
  for (bool resample : {true, false}) {
    expect_file_error([&] { read_audio(dir / "fast.wav", 22050, resample); },
                      "", -1, "its header states 393718852 Hz, 1 channel(s) and 1 frames");
  }
  EXPECT_THROW(probe_audio(dir / "fast.wav"), monoflow::FileError);
  write_audio(dir / "one.wav", {0.5f}, 96000);
  const Audio a = read_audio(dir / "one.wav", 22050, true);
  EXPECT_EQ(a.samples.size(), 0u);
  EXPECT_EQ(resampled_length(1, 96000, 22050), 0);
}

// Found by fuzz_wav: a FLAC whose STREAMINFO claims 2^36 - 1 samples was a std::bad_alloc
// (the reader allocated what the header stated); now it reads what is there and says it is short.
TEST(Audio, AHeaderClaimingBillionsOfSamplesIsATruncatedFileNotAnAllocation) {
  TempDir dir;
  write_audio(dir / "short.flac", tone(1000, 440.0, 22050), 22050);
  std::ifstream in(dir / "short.flac", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.compare(0, 4, "fLaC"), 0);
  // STREAMINFO (after "fLaC" and its 4-byte block header): the 36-bit total sample count is
  // the low nibble of byte 21 and bytes 22 to 25.
  bytes[21] = static_cast<char>(bytes[21] | 0x0f);
  for (int i = 22; i < 26; ++i) bytes[i] = static_cast<char>(0xff);
  monoflow::data::testing::write_text(dir / "claims.flac", bytes);
  EXPECT_EQ(probe_audio(dir / "claims.flac").frames, (int64_t{1} << 36) - 1);
  expect_file_error([&] { read_audio(dir / "claims.flac", 22050, true); },
                    "", -1, "truncated audio: read 1000 of 68719476735 frames");
}

TEST(Audio, WavBytesAre16BitMonoPcmThatReadsBack) {
  TempDir dir;
  const std::vector<int16_t> pcm = {0, 16384, -32767, 32767, -32768, 1};
  const std::string bytes = wav_pcm16_bytes(pcm, 16000);
  ASSERT_EQ(bytes.size(), 44u + 2 * pcm.size());  // the canonical header, then the samples
  EXPECT_EQ(bytes.substr(0, 4), "RIFF");
  EXPECT_EQ(bytes.substr(36, 4), "data");
  std::ofstream(dir / "a.wav", std::ios::binary) << bytes;
  const auto info = probe_audio(dir / "a.wav");
  EXPECT_EQ(info.sample_rate, 16000);
  EXPECT_EQ(info.channels, 1);
  EXPECT_EQ(info.frames, static_cast<int64_t>(pcm.size()));
  const auto audio = read_audio(dir / "a.wav", 16000, false);
  ASSERT_EQ(audio.samples.size(), pcm.size());
  for (size_t i = 0; i < pcm.size(); ++i) EXPECT_EQ(audio.samples[i], pcm[i] / 32768.0f) << i;
  EXPECT_EQ(wav_pcm16_bytes({}, 22050).size(), 44u);
}

}  // namespace
