#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "data/datasets.h"
#include "data/text_encoder.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using namespace monoflow::data::testing;

DataOptions options_for(const std::string& dir) {
  DataOptions o;
  o.dataset_dir = dir;
  o.validation_size = 0;
  return o;
}

TEST(Dataset, ChecksAudioAndTextBeforeBatching) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), {5000, 5000, 5000, 5000, 5000});
  posix::remove_file(dir / "wavs/u1.wav");                                    // missing
  write_audio(dir / "wavs/u2.wav", tone(1000, 300, 22050), 22050);                 // < one frame
  write_audio(dir / "wavs/u3.wav", tone(5000, 300, 16000), 16000);                 // 16 kHz
  auto utts = [&] {
    BadLines b("error");
    return read_ljspeech(dir.path(), b);
  }();
  auto o = options_for(dir.path());
  o.on_rate_mismatch = "error";
  {
    BadLines bad("skip");
    TtsDataset ds(utts, o, byte_encoder, bad);
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_EQ(ds.item(0).utterance.id, "u0");
    EXPECT_EQ(ds.item(1).utterance.id, "u4");
    EXPECT_EQ(bad.skipped(), 3);
  }
  const std::vector<std::pair<int, std::string>> expected = {
      {2, "cannot read audio"}, {3, "shorter than one frame"}, {4, "sample rate 16000"}};
  for (const auto& [line, what] : expected) {
    // Start at `line`, so that it is the first bad one.
    std::vector<Utterance> sub(utts.begin() + (line - 1), utts.end());
    BadLines strict("error");
    expect_file_error([&] { TtsDataset ds(sub, o, byte_encoder, strict); }, dir / "metadata.csv", line, what);
  }
  // With resampling the 16 kHz file is kept, its length predicted at 22.05 kHz.
  o.on_rate_mismatch = "resample";
  BadLines bad("skip");
  TtsDataset ds(utts, o, byte_encoder, bad);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.item(1).utterance.id, "u3");
  EXPECT_EQ(ds.item(1).samples, resampled_length(5000, 16000, 22050));
  auto s = ds.get(1, 0);
  EXPECT_EQ(s.mel.size(1), 1 + ds.item(1).samples / 256);
}

TEST(Dataset, TextThatEncodesToNothingIsABadLine) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), {5000, 5000});
  BadLines b("error");
  auto utts = read_ljspeech(dir.path(), b);
  TextEncoder drop_all = [](const std::string& s) {
    if (s == "text 1") return std::vector<int64_t>{};
    return byte_encoder(s);
  };
  BadLines strict("error");
  expect_file_error([&] { TtsDataset ds(utts, options_for(dir.path()), drop_all, strict); }, "", 2, "");
  TextEncoder throws = [](const std::string&) -> std::vector<int64_t> { throw monoflow::UserError("unknown symbol"); };
  BadLines skip("skip");
  TtsDataset ds(utts, options_for(dir.path()), throws, skip);
  EXPECT_EQ(ds.size(), 0u);
  EXPECT_EQ(skip.skipped(), 2);
}

// metadata.csv with the given normalized texts, each over audio of `samples` samples.
std::vector<Utterance> corpus_with_texts(const TempDir& dir, const std::vector<std::string>& texts,
                                         int64_t samples) {
  make_synthetic_ljspeech(dir.path(), std::vector<int64_t>(texts.size(), samples));
  std::string meta;
  for (size_t i = 0; i < texts.size(); ++i) meta += "u" + std::to_string(i) + "|raw|" + texts[i] + "\n";
  write_text(dir / "metadata.csv", meta);
  BadLines b("error");
  return read_ljspeech(dir.path(), b);
}

TEST(Dataset, TextWithNoSymbolOfTheSetIsABadLine) {
  TempDir dir;
  // Line 2 is Japanese: no character has a symbol in the english set. With add_space and
  // add_blank it would still encode to spaces and blanks, and train against them.
  auto utts = corpus_with_texts(dir, {"hello", "\xE6\x97\xA5\xE6\x9C\xAC", "world"}, 5000);
  monoflow::text::TextOptions to;
  to.cleaners = {"basic_cleaners"};
  to.add_space = true;
  to.add_blank = true;
  auto tp = std::make_shared<const monoflow::text::TextProcessor>(to);
  ASSERT_FALSE(tp->encode(utts[1].text).empty());
  BadLines strict("error");
  expect_file_error([&] { TtsDataset ds(utts, options_for(dir.path()), text_encoder(tp), strict); },
                    dir / "metadata.csv", 2, "has a symbol in the english symbol set");
  BadLines skip("skip");
  TtsDataset ds(utts, options_for(dir.path()), text_encoder(tp), skip);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(skip.skipped(), 1);
}

TEST(Dataset, UtteranceTooShortToAlignIsABadLine) {
  TempDir dir;
  // 5200 samples = 1 + 5200/256 = 21 mel frames; n_sqz 2 leaves 20. Line 2's text has 21
  // tokens (one per byte): alignable with n_sqz 1, not with n_sqz 2.
  auto utts = corpus_with_texts(dir, {std::string(20, 'a'), std::string(21, 'b'), "short"}, 5200);
  auto o = options_for(dir.path());
  o.n_sqz = 1;
  {
    BadLines strict("error");
    EXPECT_EQ(TtsDataset(utts, o, byte_encoder, strict).size(), 3u);
  }
  o.n_sqz = 2;
  BadLines strict("error");
  expect_file_error([&] { TtsDataset ds(utts, o, byte_encoder, strict); },
                    dir / "metadata.csv", 2, "cannot be aligned: its text has 21 tokens but the audio only 20");
  // Under skip it is left out and counted in load_datasets' summary.
  o.on_bad_line = "skip";
  auto sets = load_datasets(o, byte_encoder);
  EXPECT_EQ(sets.train->size(), 2u);
  EXPECT_EQ(sets.bad_lines, 1);
}

TEST(Dataset, AlignmentCheckCountsTheBlanksOfAddBlank) {
  TempDir dir;
  // 8 letters -> 17 tokens with add_blank; 21 frames hold 17, 3000 samples (12 frames) do not.
  monoflow::text::TextOptions to;
  to.cleaners = {"basic_cleaners"};
  to.add_blank = true;
  auto tp = std::make_shared<const monoflow::text::TextProcessor>(to);
  ASSERT_EQ(tp->encode("abcdefgh").size(), 17u);
  auto fits = corpus_with_texts(dir, {"abcdefgh"}, 5200);
  BadLines strict("error");
  EXPECT_EQ(TtsDataset(fits, options_for(dir.path()), text_encoder(tp), strict).size(), 1u);
  TempDir dir2;
  auto too_short = corpus_with_texts(dir2, {"abcdefgh"}, 3000);
  BadLines skip("skip");
  EXPECT_EQ(TtsDataset(too_short, options_for(dir2.path()), text_encoder(tp), skip).size(), 0u);
  EXPECT_EQ(skip.skipped(), 1);
}

TEST(Dataset, SampleHasTokensMelAndPredictedLength) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), {5000, 12345, 300000});
  auto o = options_for(dir.path());
  o.max_mel_frames = 1000;  // 300000 samples = 1172 frames: left out
  BadLines bad("error");
  auto utts = read_ljspeech(dir.path(), bad);
  TtsDataset ds(utts, o, byte_encoder, bad);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.stats().too_long, 1);
  EXPECT_NEAR(ds.stats().audio_seconds, (5000 + 12345) / 22050.0, 1e-9);
  EXPECT_EQ(ds.mel_lengths(), (std::vector<int64_t>{1 + 5000 / 256, 1 + 12345 / 256}));
  auto s = ds.get(1, 42);
  EXPECT_EQ(s.id, "u1");
  EXPECT_TRUE(torch::equal(s.text, torch::tensor(byte_encoder("text 1"), torch::kInt64)));
  EXPECT_EQ(s.mel.sizes(), (std::vector<int64_t>{80, 1 + 12345 / 256}));
  // Same dither seed, same mel; another seed changes it slightly.
  EXPECT_TRUE(torch::equal(ds.get(1, 42).mel, s.mel));
  auto other = ds.get(1, 43).mel;
  EXPECT_FALSE(torch::equal(other, s.mel));
  // Dither is 1/32768 of full scale: it dominates only bands without signal; where the tone is
  // (log mel > -4) it moves the log mel by far less than 1e-3.
  auto strong = s.mel > -4.0;
  ASSERT_GT(strong.sum().item<int64_t>(), 0);
  EXPECT_LT((other - s.mel).abs().masked_select(strong).max().item<float>(), 1e-3f);
}

TEST(Datasets, SeededSplitOrValidationFilelist) {
  TempDir dir;
  std::vector<int64_t> lengths(30, 4000);
  make_synthetic_ljspeech(dir.path(), lengths);
  DataOptions o;
  o.dataset_dir = dir.path();
  o.validation_size = 7;
  auto d = load_datasets(o, byte_encoder);
  EXPECT_EQ(d.train->size(), 23u);
  EXPECT_EQ(d.validation->size(), 7u);
  EXPECT_EQ(d.bad_lines, 0);
  auto again = load_datasets(o, byte_encoder);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(again.validation->item(i).utterance.id, d.validation->item(i).utterance.id);
  // Filelists: relative paths resolved against dataset_dir.
  write_text(dir / "train.txt", "wavs/u0.wav|one\nwavs/u1.wav|two\nwavs/u2.wav|three\n");
  write_text(dir / "val.txt", "wavs/u3.wav|four\n");
  o.training_files = dir / "train.txt";
  o.validation_files = dir / "val.txt";
  auto f = load_datasets(o, byte_encoder);
  EXPECT_EQ(f.train->size(), 3u);
  ASSERT_EQ(f.validation->size(), 1u);
  EXPECT_EQ(f.validation->item(0).utterance.id, "u3");
  o.on_bad_line = "sometimes";
  EXPECT_THROW(load_datasets(o, byte_encoder), monoflow::UserError);
}

}  // namespace

namespace {

TEST(DataOptions, BadValuesNameTheirKey) {
  auto expect_key = [](monoflow::data::DataOptions o, const std::string& key) {
    try {
      o.validate();
      FAIL() << "expected UserError for " << key;
    } catch (const monoflow::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("data." + key), std::string::npos) << e.what();
    }
  };
  monoflow::data::DataOptions ok;
  ok.dataset_dir = "somewhere";
  EXPECT_NO_THROW(ok.validate());
  auto o = ok;
  o.mel.win_length = 2048;  // > filter_length
  expect_key(o, "win_length");
  o = ok;
  o.mel.mel_fmax = 12000;  // > sampling_rate / 2
  expect_key(o, "mel_fmax");
  o = ok;
  o.on_rate_mismatch = "ignore";
  expect_key(o, "on_rate_mismatch");
  o = ok;
  o.dataset_dir.clear();
  expect_key(o, "dataset_dir");
}

}  // namespace
