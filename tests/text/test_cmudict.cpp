#include <gtest/gtest.h>

#include "common/error.h"
#include "data/text/cmudict.h"
#include "fixtures.h"

namespace monoflow::text {
namespace {

using testing::fixture;

TEST(CmuDict, ParsesEntriesAlternativesAndSkipsTheRest) {
  const CmuDict d(fixture("tiny_cmudict.txt"));
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

TEST(CmuDict, MissingFileNamesThePath) {
  const std::string path = fixture("no_such_cmudict.txt");
  try {
    CmuDict d(path);
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

TEST(CmuDict, EntryWithoutPronunciationNamesFileAndLine) {
  const std::string path = fixture("malformed_cmudict.txt");
  try {
    CmuDict d(path);
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find(path + ":2:"), std::string::npos) << e.what();
  }
}

TEST(CmuDict, FileWithoutEntriesIsAnError) {
  try {
    CmuDict d(fixture("lowercase_cmudict.txt"));
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("no CMUdict entries"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace monoflow::text
