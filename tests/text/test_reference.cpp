// monoflow's english_cleaners against the original's output (inflect + unidecode), line by line
// from tests/data/fixtures/text/english_cleaners_reference.tsv (made by make_reference.py).
#include <gtest/gtest.h>

#include <fstream>

#include "data/text/cleaners.h"
#include "fixtures.h"

namespace monoflow::text {
namespace {

TEST(EnglishCleanersReference, MatchesTheOriginalOnEveryLine) {
  const std::string path = testing::fixture("english_cleaners_reference.tsv");
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  int line_no = 0, checked = 0, failures = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << path << ":" << line_no;
    const std::string input = line.substr(0, tab);
    const std::string expected = line.substr(tab + 1);
    const std::string got = english_cleaners(input);
    ++checked;
    if (got != expected && ++failures <= 20) {
      ADD_FAILURE() << path << ":" << line_no << ": [" << input << "] -> [" << got
                    << "], original [" << expected << "]";
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 2800);
}

}  // namespace
}  // namespace monoflow::text
