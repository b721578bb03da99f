// monoflow's text front-end against the original's output (inflect + unidecode), line by line
// from tests/data/fixtures/text/*_reference.tsv (made by make_reference.py).
#include <gtest/gtest.h>

#include <fstream>

#include "data/text/cleaners.h"
#include "data/text/text_processor.h"
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

std::vector<int64_t> parse_ids(const std::string& s) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    ids.push_back(std::stoll(s.substr(start, comma - start)));
    start = comma + 1;
  }
  return ids;
}

TEST(TextToSequenceReference, IdsMatchTheOriginalWithAndWithoutCmudict) {
  TextOptions with_dict;
  with_dict.cmudict_path = testing::fixture("tiny_cmudict.txt");
  const TextProcessor plain(TextOptions{});
  const TextProcessor dict(with_dict);
  const std::string path = testing::fixture("text_to_sequence_reference.tsv");
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  int line_no = 0, checked = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t t1 = line.find('\t');
    const size_t t2 = line.find('\t', t1 + 1);
    ASSERT_NE(t2, std::string::npos) << path << ":" << line_no;
    const bool use_dict = line.substr(0, t1) == "1";
    const std::string input = line.substr(t1 + 1, t2 - t1 - 1);
    const auto expected = parse_ids(line.substr(t2 + 1));
    EXPECT_EQ((use_dict ? dict : plain).encode(input), expected)
        << path << ":" << line_no << ": [" << input << "]";
    ++checked;
  }
  EXPECT_EQ(checked, 38);
}

}  // namespace
}  // namespace monoflow::text
