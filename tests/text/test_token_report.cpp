// token_report (data/text/token_report.h), what tools/tokens prints: the cleaned text, the
// tokens joined by '|' with their count, and the ids, for the original english front-end.
#include <gtest/gtest.h>

#include <sstream>

#include "data/text/text_processor.h"
#include "data/text/token_report.h"

namespace monoflow::text {
namespace {

TEST(TokenReport, ShowsCleanedTextTokensAndIds) {
  const TextProcessor tp(TextOptions{});
  const std::string report = token_report(tp, "Dr. Smith paid $5.");
  std::istringstream lines(report);
  std::string cleaned, tokens, ids;
  std::getline(lines, cleaned);
  std::getline(lines, tokens);
  std::getline(lines, ids);
  EXPECT_EQ(cleaned, "cleaned: doctor smith paid five dollars.");
  EXPECT_EQ(tokens.rfind("tokens (31): d|o|c|t|o|r| |s|m|i|t|h|", 0), 0u) << tokens;
  std::string expected_ids = "ids:";
  for (const int64_t id : tp.encode("Dr. Smith paid $5.")) expected_ids += " " + std::to_string(id);
  EXPECT_EQ(ids, expected_ids);
  std::string rest;
  EXPECT_FALSE(std::getline(lines, rest));  // three lines, nothing else
}

TEST(TokenReport, BlanksShowAsBlankTokens) {
  TextOptions o;
  o.add_blank = true;
  const TextProcessor tp(o);
  const std::string report = token_report(tp, "ab");
  EXPECT_NE(report.find("tokens (5): <blank>|a|<blank>|b|<blank>"), std::string::npos) << report;
}

}  // namespace
}  // namespace monoflow::text
