#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <set>

#include "common/error.h"
#include "data/manifest.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using monoflow::data::testing::expect_file_error;
using monoflow::data::testing::TempDir;
using monoflow::data::testing::write_text;

// Each test reads lists it writes into a fresh folder.
class Manifest : public ::testing::Test {
 protected:
  // Writes `metadata` as the folder's metadata.csv and reads the folder as an LJSpeech corpus.
  std::vector<Utterance> read_metadata(const std::string& metadata, BadLines& bad) {
    write_text(dir / "metadata.csv", metadata);
    return read_ljspeech(dir.path(), bad);
  }
  TempDir dir;
};

TEST_F(Manifest, LJSpeechUsesTheNormalizedColumn) {
  BadLines bad("error");
  auto u = read_metadata("LJ001-0001|Printing, in the 1st sense|Printing, in the first sense\r\n"
                         "\n"
                         "LJ001-0002|Mr. Smith|Mister Smith\n",
                         bad);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].id, "LJ001-0001");
  EXPECT_EQ(u[0].text, "Printing, in the first sense");
  EXPECT_EQ(u[0].audio_path, dir / "wavs/LJ001-0001.wav");
  EXPECT_EQ(u[0].line, 1);
  EXPECT_EQ(u[1].text, "Mister Smith");
  EXPECT_EQ(u[1].line, 3);
  EXPECT_EQ(u[1].speaker, -1);
}

TEST_F(Manifest, ErrorPolicyNamesFileAndLine) {
  write_text(dir / "metadata.csv", "a|A|a\nb|only two\nc|C|c\n");
  BadLines bad("error");
  expect_file_error([&] { read_ljspeech(dir.path(), bad); }, dir / "metadata.csv", 2, "metadata.csv:2:");
}

TEST_F(Manifest, SkipPolicyCountsBadLines) {
  BadLines bad("skip");
  auto u = read_metadata("a|A|a\nb|only two\nc|C|   \n|D|d\ne|E|e\n", bad);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].id, "a");
  EXPECT_EQ(u[1].id, "e");
  EXPECT_EQ(bad.skipped(), 3);
  EXPECT_THROW(BadLines("ignore"), monoflow::UserError);
}

TEST_F(Manifest, MissingMetadataIsAFileError) {
  BadLines bad("skip");
  EXPECT_THROW(read_ljspeech(dir / "nowhere", bad), monoflow::FileError);
  EXPECT_THROW(read_filelist(dir / "none.txt", false, 0, "", bad), monoflow::FileError);
}

// Found by fuzz_manifest: a directory opened as an empty list, and the run failed later with
// "no training utterances" instead of naming the path.
TEST_F(Manifest, ADirectoryAsTheListIsAFileErrorNamingIt) {
  std::filesystem::create_directories(dir / "ljs/metadata.csv");
  BadLines bad("skip");
  for (const auto& read : std::vector<std::function<void()>>{
           [&] { read_ljspeech(dir / "ljs", bad); },
           [&] { read_filelist(dir / "ljs/metadata.csv", false, 0, "", bad); }}) {
    expect_file_error([&] { read(); }, dir / "ljs/metadata.csv", -1, "is a directory, not a file");
  }
}

TEST_F(Manifest, FilelistSingleSpeaker) {
  write_text(dir / "list.txt", "DUMMY/LJ001-0001.wav|Text one.\n/abs/x.wav|Two | with a pipe\nnopipe\n");
  BadLines bad("skip");
  auto u = read_filelist(dir / "list.txt", false, 0, "/data/lj", bad, /*allow_outside=*/true);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].audio_path, "/data/lj/DUMMY/LJ001-0001.wav");
  EXPECT_EQ(u[0].id, "LJ001-0001");
  EXPECT_EQ(u[0].text, "Text one.");
  EXPECT_EQ(u[1].audio_path, "/abs/x.wav");  // only with data.allow_outside_paths (test_inputs.cpp)
  EXPECT_EQ(u[1].text, "Two | with a pipe");
  EXPECT_EQ(bad.skipped(), 1);
  auto rel = read_filelist(dir / "list.txt", false, 0, "", bad);
  EXPECT_EQ(rel[0].audio_path, "DUMMY/LJ001-0001.wav");
}

TEST_F(Manifest, FilelistMultiSpeaker) {
  write_text(dir / "list.txt", "a.wav|3|Hello.\nb.wav|x|Bad speaker.\nc.wav|12|Too big.\nd.wav|0|\ne.wav|11|Last.\n");
  BadLines bad("skip");
  auto u = read_filelist(dir / "list.txt", true, 12, "", bad);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].speaker, 3);
  EXPECT_EQ(u[0].text, "Hello.");
  EXPECT_EQ(u[1].speaker, 11);
  EXPECT_EQ(u[1].line, 5);
  EXPECT_EQ(bad.skipped(), 3);
  BadLines strict("error");
  expect_file_error([&] { read_filelist(dir / "list.txt", true, 12, "", strict); }, "", 2, "");
}

TEST_F(Manifest, SeededSplitIsDeterministicAndDisjoint) {
  std::vector<Utterance> all(50);
  for (int i = 0; i < 50; ++i) all[i].id = "u" + std::to_string(i);
  auto a = seeded_split(all, 10, 1234);
  auto b = seeded_split(all, 10, 1234);
  auto c = seeded_split(all, 10, 99);
  ASSERT_EQ(a.first.size(), 40u);
  ASSERT_EQ(a.second.size(), 10u);
  std::set<std::string> ids;
  for (auto& u : a.first) ids.insert(u.id);
  for (auto& u : a.second) ids.insert(u.id);
  EXPECT_EQ(ids.size(), 50u);
  auto names = [](const std::vector<Utterance>& v) {
    std::vector<std::string> n;
    for (auto& u : v) n.push_back(u.id);
    return n;
  };
  EXPECT_EQ(names(a.second), names(b.second));
  EXPECT_NE(names(a.second), names(c.second));
  // The validation part keeps the input order.
  auto v = names(a.second);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_LT(std::stoi(v[i - 1].substr(1)), std::stoi(v[i].substr(1)));
  EXPECT_EQ(seeded_split(all, 500, 1).first.size(), 1u);  // at least one left for training
}

TEST_F(Manifest, ByteOrderMarkIsStripped) {
  BadLines bad("error");
  auto u = read_metadata("\xEF\xBB\xBFLJ001-0001|One|one\nLJ001-0002|Two|two\n", bad);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].id, "LJ001-0001");
  EXPECT_EQ(u[0].audio_path, dir / "wavs/LJ001-0001.wav");
  write_text(dir / "list.txt", "\xEF\xBB\xBF" "a.wav|Hello.\n");
  auto f = read_filelist(dir / "list.txt", false, 0, "", bad);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].audio_path, "a.wav");
}

TEST_F(Manifest, InvalidUtf8IsABadLineWithFileAndLine) {
  // Line 2: a Latin-1 'e acute' (0xE9), not UTF-8; line 3: valid UTF-8 'e acute'.
  write_text(dir / "metadata.csv", "a|A|a\nb|Caf\xE9|caf\xE9\nc|Caf\xC3\xA9|caf\xC3\xA9\n");
  BadLines strict("error");
  expect_file_error([&] { read_ljspeech(dir.path(), strict); }, dir / "metadata.csv", 2, "invalid UTF-8");
  BadLines skip("skip");
  auto u = read_ljspeech(dir.path(), skip);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[1].text, "caf\xC3\xA9");
  EXPECT_EQ(skip.skipped(), 1);
  write_text(dir / "list.txt", "a.wav|ok\nb.wav|\x80 stray\n");
  BadLines strict_list("error");
  expect_file_error([&] { read_filelist(dir / "list.txt", false, 0, "", strict_list); }, "", 2, "");
}

}  // namespace
