// Number words as the original numbers.py produced them with inflect (hyphens included).
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "data/text/numbers.h"

namespace monoflow::text {
namespace {

// Text -> what the original numbers.py said (with inflect).
TEST(Numbers, SpeaksAsTheOriginal) {
  const std::pair<std::string, std::string> cases[] = {
    // cardinals
    {"0", "zero"},
    {"7", "seven"},
    {"13", "thirteen"},
    {"40", "forty"},
    {"42", "forty-two"},
    {"100", "one hundred"},
    {"123", "one hundred twenty-three"},
    {"1000", "one thousand"},
    {"3000", "three thousand"},
    {"5100", "five thousand, one hundred"},
    {"10050", "ten thousand fifty"},
    {"1000005", "one million five"},
    {"1000000000000", "one trillion"},
    {"007", "seven"},
    // commas in numbers
    {"1,234,567", "one million, two hundred thirty-four thousand, five hundred sixty-seven"},
    {"45,000 men", "forty-five thousand men"},
    {"1,000", "one thousand"},
    // years and the two-thousand rules
    {"1999", "nineteen ninety-nine"},
    {"2000", "two thousand"},
    {"2005", "two thousand five"},
    {"1900", "nineteen hundred"},
    {"2100", "twenty-one hundred"},
    {"1905", "nineteen oh five"},
    {"2015", "twenty fifteen"},
    {"1066", "ten sixty-six"},
    // ordinals
    {"1st", "first"},
    {"2nd", "second"},
    {"3rd", "third"},
    {"4th", "fourth"},
    {"11th", "eleventh"},
    {"12th", "twelfth"},
    {"20th", "twentieth"},
    {"21st", "twenty-first"},
    {"58th", "fifty-eighth"},
    {"101st", "one hundred and first"},  // inflect's default andword, as the original called it
    {"1005th", "one thousand and fifth"},
    // decimals
    {"3.14", "three point fourteen"},
    {"0.5", "zero point five"},
    // dollars
    {"$5", "five dollars"},
    {"$1", "one dollar"},
    {"$1.50", "one dollar, fifty cents"},
    {"$3.01", "three dollars, one cent"},
    {"$0.01", "one cent"},
    {"$0.00", "zero dollars"},
    {"$2,500", "twenty-five hundred dollars"},
    {"$1.2.3", "one point two.three dollars"},  // the original's fallback
    // in sentences
    {"on the 3rd of may 1999, 12 men paid $3.50",
     "on the third of may nineteen ninety-nine, twelve men paid three dollars, fifty cents"},
    {"no digits here.", "no digits here."},
  };
  for (const auto& [text, spoken] : cases) EXPECT_EQ(normalize_numbers(text), spoken) << text;
}

TEST(Numbers, Pounds) {
  EXPECT_EQ(normalize_numbers("\xC2\xA3" "5"), "five pounds");
  EXPECT_EQ(normalize_numbers("\xC2\xA3" "1,000"), "one thousand pounds");
  EXPECT_EQ(expand_pounds("cost \xC2\xA3" "20 each"), "cost 20 pounds each");
}

TEST(Numbers, WordHelpers) {
  EXPECT_EQ(cardinal_words("1234", ""), "one thousand, two hundred thirty-four");
  EXPECT_EQ(cardinal_words("1234", "and"), "one thousand, two hundred and thirty-four");
  EXPECT_EQ(cardinal_words("2019", ""), "two thousand nineteen");
  EXPECT_EQ(ordinal_of("ninety-nine"), "ninety-ninth");
  EXPECT_EQ(ordinal_of("seventy"), "seventieth");
  EXPECT_EQ(ordinal_of("one hundred"), "one hundredth");
  EXPECT_EQ(expand_number("1999"), "nineteen ninety-nine");
  // Past "decillion" inflect had no words: digit by digit.
  EXPECT_EQ(cardinal_words(std::string(37, '1'), "").substr(0, 12), "one one one ");
}

}  // namespace
}  // namespace monoflow::text
