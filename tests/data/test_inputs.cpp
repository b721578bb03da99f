// What a dataset may hold that the data library must not trust (issue #28): FIFOs and other
// non-files where files belong (refused, never waited on), ids and filelist paths that would
// lead out of the dataset, the same audio listed twice, a validation split that leaves nothing
// to train, and audio whose samples are NaN/Inf or silent.
#include <gtest/gtest.h>
#include <sndfile.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/contained_path.h"
#include "common/error.h"
#include "data/audio.h"
#include "data/datasets.h"
#include "data/manifest.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using namespace monoflow::data::testing;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- Nothing hangs ----------------------------------------------------------------------------

TEST(Inputs, AFifoAsMetadataIsRefusedNotWaitedOn) {
  TempDir dir;
  make_fifo(dir / "metadata.csv");
  BadLines bad("skip");
  const std::string e = error_within([&] { read_ljspeech(dir.path(), bad); }, {dir / "metadata.csv"});
  EXPECT_TRUE(contains(e, dir / "metadata.csv: is a FIFO (named pipe), not a file")) << e;
}

TEST(Inputs, AFifoAsAFilelistIsRefusedNotWaitedOn) {
  TempDir dir;
  make_fifo(dir / "list.txt");
  BadLines bad("skip");
  const std::string e =
      error_within([&] { read_filelist(dir / "list.txt", false, 0, dir.path(), bad); }, {dir / "list.txt"});
  EXPECT_TRUE(contains(e, dir / "list.txt: is a FIFO (named pipe), not a file")) << e;
}

// A FIFO as a wav: a bad line under skip (counted, the rest loads), the first error under error.
// The audio is probed at load time, so it would block there.
TEST(Inputs, AFifoAsAWavIsABadLine) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), {4000, 4000, 4000});
  const std::string wav = dir / "wavs/u1.wav";
  posix::remove_file(wav);
  make_fifo(wav);
  DataOptions o;
  o.dataset_dir = dir.path();
  o.validation_size = 0;
  size_t kept = 0;
  int64_t skipped = -1;
  std::string e = error_within([&] {
    const Datasets d = load_datasets(o, byte_encoder);
    kept = d.train->size();
    skipped = d.bad_lines;
  }, {wav});
  EXPECT_EQ(e, "(no error)");
  EXPECT_EQ(kept, 2u);
  EXPECT_EQ(skipped, 1);
  o.on_bad_line = "error";
  e = error_within([&] { load_datasets(o, byte_encoder); }, {wav});
  EXPECT_TRUE(contains(e, dir / "metadata.csv:2: " + wav + ": is a FIFO (named pipe), not a file")) << e;
  // read_audio, which a changed file reaches after the load, refuses it as well.
  e = error_within([&] { read_audio(wav, 22050, true); }, {wav});
  EXPECT_TRUE(contains(e, "is a FIFO")) << e;
}

TEST(Inputs, ADeviceOrAFolderAsAWavIsRefused) {
  for (const std::string path : {"/dev/zero", "/tmp"}) {
    const std::string e = error_within([&] { probe_audio(path); }, {});
    EXPECT_TRUE(contains(e, path + ": is a " + (path == "/tmp" ? "directory" : "character device"))) << e;
  }
}

// ---- Nothing escapes --------------------------------------------------------------------------

TEST(Inputs, AnIdIsANameNotAPath) {
  TempDir dir;
  write_text(dir / "metadata.csv", std::string("good|A|a\n../secret|B|b\n/etc/passwd|C|c\nsub/x|D|d\n"
                                               "a\\b|E|e\n..|F|f\nnul") +
                                       '\0' + "x|G|g\nlast|H|h\n");
  BadLines skip("skip");
  const auto u = read_ljspeech(dir.path(), skip);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].id, "good");
  EXPECT_EQ(u[1].id, "last");
  EXPECT_EQ(skip.skipped(), 6);
  BadLines strict("error");
  expect_file_error([&] { read_ljspeech(dir.path(), strict); }, dir / "metadata.csv", 2,
                    "utterance id '../secret' holds a path separator ('/'); an id is a file name in wavs/, not a path");
}

TEST(Inputs, AFilelistPathStaysInsideTheDatasetFolder) {
  TempDir dir;
  write_text(dir / "list.txt",
             "speaker1/a.wav|One.\n"           // 1: a sub-folder: fine
             "speaker1/../b.wav|Two.\n"        // 2: stays inside: fine
             "../outside.wav|Three.\n"         // 3: leads out
             "sub/../../x.wav|Four.\n"         // 4: leads out
             "/etc/passwd|Five.\n");           // 5: absolute
  BadLines skip("skip");
  auto u = read_filelist(dir / "list.txt", false, 0, dir / "ds", skip);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].audio_path, dir / "ds/speaker1/a.wav");
  EXPECT_EQ(u[1].id, "b");
  EXPECT_EQ(skip.skipped(), 3);
  BadLines strict("error");
  expect_file_error([&] { read_filelist(dir / "list.txt", false, 0, dir / "ds", strict); }, dir / "list.txt", 3,
                    "audio path '../outside.wav' leads out of " + (dir / "ds") + " (or set data.allow_outside_paths: true)");
  write_text(dir / "abs.txt", "/etc/passwd|Five.\n");
  expect_file_error([&] { read_filelist(dir / "abs.txt", false, 0, "", strict); }, dir / "abs.txt", 1,
                    "audio path '/etc/passwd' is absolute; give it relative to the working directory");
  // Without a dataset folder the working directory is the folder.
  BadLines skip2("skip");
  EXPECT_EQ(read_filelist(dir / "list.txt", false, 0, "", skip2).size(), 2u);
  EXPECT_EQ(skip2.skipped(), 3);
  // The user's explicit choice lets them all through.
  BadLines skip3("skip");
  u = read_filelist(dir / "list.txt", false, 0, dir / "ds", skip3, /*allow_outside=*/true);
  EXPECT_EQ(u.size(), 5u);
  EXPECT_EQ(u[4].audio_path, "/etc/passwd");
  EXPECT_EQ(skip3.skipped(), 0);
}

TEST(Inputs, ContainedPathChecks) {
  using monoflow::child_path;
  using monoflow::lexically_inside;
  using monoflow::name_problem;
  EXPECT_EQ(name_problem("LJ001-0001"), "");
  EXPECT_EQ(name_problem("a..b"), "");  // dots inside a name are a name
  for (const std::string& bad : std::vector<std::string>{"", ".", "..", "a/b", "/abs", "a\\b", std::string("a\0b", 3),
                                                         "tab\there"}) {
    EXPECT_NE(name_problem(bad), "") << bad;
  }
  EXPECT_TRUE(lexically_inside("out", "out/x.json"));
  EXPECT_TRUE(lexically_inside("out/", "out/a/../x.json"));
  EXPECT_TRUE(lexically_inside("", "a/b.wav"));
  EXPECT_FALSE(lexically_inside("out", "out/../x.json"));
  EXPECT_FALSE(lexically_inside("out", "out"));
  EXPECT_FALSE(lexically_inside("/data", "/etc/passwd"));
  EXPECT_FALSE(lexically_inside("data", "/data/x"));
  EXPECT_EQ(child_path("out/durations", "LJ001", ".json", "utterance id"), "out/durations/LJ001.json");
  EXPECT_THROW(child_path("out", "../secret", ".json", "utterance id"), monoflow::UserError);
  EXPECT_THROW(child_path("out", "..", "", "utterance id"), monoflow::UserError);
}

// ---- Data problems are named ------------------------------------------------------------------

TEST(Inputs, TheSameAudioTwiceIsABadLineNamingBoth) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), {4000, 4000, 4000});
  write_text(dir / "metadata.csv", "u0|A|a\nu1|B|b\nu2|C|c\nu1|B again|another transcript\n");
  DataOptions o;
  o.dataset_dir = dir.path();
  o.validation_size = 1;
  const Datasets d = load_datasets(o, byte_encoder);
  EXPECT_EQ(d.train->size() + d.validation->size(), 3u);
  EXPECT_EQ(d.bad_lines, 1);
  o.on_bad_line = "error";
  expect_file_error([&] { load_datasets(o, byte_encoder); }, dir / "metadata.csv", 4,
                    "utterance 'u1' repeats " + (dir / "metadata.csv") + ":2 ('u1'): both name " + (dir / "wavs/u1.wav"));
  // Across a training and a validation filelist: validated on what it trained on.
  write_text(dir / "train.txt", "wavs/u0.wav|a\nwavs/u1.wav|b\n");
  write_text(dir / "val.txt", "wavs/u2.wav|c\nsub/../wavs/u0.wav|a\n");
  o.training_files = dir / "train.txt";
  o.validation_files = dir / "val.txt";
  expect_file_error([&] { load_datasets(o, byte_encoder); }, dir / "val.txt", 2,
                    "repeats " + (dir / "train.txt") + ":1 ('u0')");
}

TEST(Inputs, AValidationSizeThatLeavesNoTrainingIsAnErrorNamingKeyAndCounts) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), std::vector<int64_t>(12, 4000));
  DataOptions o;
  o.dataset_dir = dir.path();
  o.validation_size = 100;
  try {
    load_datasets(o, byte_encoder);
    FAIL() << "no error";
  } catch (const monoflow::OptionError& e) {
    EXPECT_EQ(e.key(), "data.validation_size");
    EXPECT_TRUE(contains(e.what(), "data.validation_size: 100 held-out utterances leave none of the 12 usable lines of " +
                                       (dir / "metadata.csv") + " for training; set it below 12"))
        << e.what();
  }
  o.validation_size = 12;
  EXPECT_THROW(load_datasets(o, byte_encoder), monoflow::OptionError);
  o.validation_size = 11;
  const Datasets d = load_datasets(o, byte_encoder);
  EXPECT_EQ(d.train->size(), 1u);
  EXPECT_EQ(d.validation->size(), 11u);
}

// A 32-bit float wav holding `samples` as they are (NaN and Inf included).
void write_float_wav(const std::string& path, const std::vector<float>& samples) {
  SF_INFO info{};
  info.samplerate = 22050;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(f, nullptr) << sf_strerror(nullptr);
  sf_command(f, SFC_SET_NORM_FLOAT, nullptr, SF_FALSE);
  EXPECT_EQ(sf_writef_float(f, samples.data(), static_cast<sf_count_t>(samples.size())),
            static_cast<sf_count_t>(samples.size()));
  sf_close(f);
}

TEST(Inputs, NonFiniteOrSilentAudioIsABadLineNamingTheUtterance) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), {4000, 4000, 4000, 4000});
  std::vector<float> nan = tone(4000, 300, 22050);
  nan[2205] = std::nanf("");
  nan[3000] = INFINITY;
  write_float_wav(dir / "wavs/u1.wav", nan);
  write_audio(dir / "wavs/u2.wav", std::vector<float>(4000, 0.0f), 22050);
  DataOptions o;
  o.dataset_dir = dir.path();
  o.validation_size = 0;
  const Datasets d = load_datasets(o, byte_encoder);
  ASSERT_EQ(d.train->size(), 2u);
  EXPECT_EQ(d.train->item(0).utterance.id, "u0");
  EXPECT_EQ(d.train->item(1).utterance.id, "u3");
  EXPECT_EQ(d.bad_lines, 2);
  o.on_bad_line = "error";
  expect_file_error([&] { load_datasets(o, byte_encoder); }, dir / "metadata.csv", 2,
                    "utterance 'u1': " + (dir / "wavs/u1.wav") + ": 2 NaN/Inf sample(s), the first at 0.100 s");
  write_audio(dir / "wavs/u1.wav", tone(4000, 300, 22050), 22050);
  expect_file_error([&] { load_datasets(o, byte_encoder); }, dir / "metadata.csv", 3,
                    "utterance 'u2': " + (dir / "wavs/u2.wav") + ": silent: no sample reaches one 16-bit step");
}

// The samples are checked again where the mel is computed: a file that turned bad after the
// load (or whose cached mel was lost) stops with its name instead of caching a NaN mel.
TEST(Inputs, AudioThatTurnsNonFiniteAfterTheLoadStopsTheMelNamingIt) {
  TempDir dir;
  make_synthetic_ljspeech(dir.path(), {4000, 4000});
  DataOptions o;
  o.dataset_dir = dir.path();
  BadLines bad("error");
  TtsDataset ds(read_ljspeech(dir.path(), bad), o, byte_encoder, bad);
  std::vector<float> nan = tone(4000, 300, 22050);
  nan[0] = std::nanf("");
  write_float_wav(dir / "wavs/u0.wav", nan);
  expect_file_error([&] { ds.compute_mel(0, 1); }, dir / "wavs/u0.wav", -1,
                    "utterance 'u0' (" + (dir / "metadata.csv") + ":1): 1 NaN/Inf sample(s)");
}

}  // namespace
