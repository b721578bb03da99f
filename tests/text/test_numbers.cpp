// Number words as the original numbers.py produced them with inflect (hyphens included).
#include <gtest/gtest.h>

#include "data/text/numbers.h"

namespace monoflow::text {
namespace {

TEST(Numbers, Cardinals) {
  EXPECT_EQ(normalize_numbers("0"), "zero");
  EXPECT_EQ(normalize_numbers("7"), "seven");
  EXPECT_EQ(normalize_numbers("13"), "thirteen");
  EXPECT_EQ(normalize_numbers("40"), "forty");
  EXPECT_EQ(normalize_numbers("42"), "forty-two");
  EXPECT_EQ(normalize_numbers("100"), "one hundred");
  EXPECT_EQ(normalize_numbers("123"), "one hundred twenty-three");
  EXPECT_EQ(normalize_numbers("1000"), "one thousand");
  EXPECT_EQ(normalize_numbers("3000"), "three thousand");
  EXPECT_EQ(normalize_numbers("5100"), "five thousand, one hundred");
  EXPECT_EQ(normalize_numbers("10050"), "ten thousand fifty");
  EXPECT_EQ(normalize_numbers("1000005"), "one million five");
  EXPECT_EQ(normalize_numbers("1000000000000"), "one trillion");
  EXPECT_EQ(normalize_numbers("007"), "seven");
}

TEST(Numbers, CommasInNumbers) {
  EXPECT_EQ(normalize_numbers("1,234,567"),
            "one million, two hundred thirty-four thousand, five hundred sixty-seven");
  EXPECT_EQ(normalize_numbers("45,000 men"), "forty-five thousand men");
  EXPECT_EQ(normalize_numbers("1,000"), "one thousand");
}

TEST(Numbers, YearsAndTheTwoThousandRules) {
  EXPECT_EQ(normalize_numbers("1999"), "nineteen ninety-nine");
  EXPECT_EQ(normalize_numbers("2000"), "two thousand");
  EXPECT_EQ(normalize_numbers("2005"), "two thousand five");
  EXPECT_EQ(normalize_numbers("1900"), "nineteen hundred");
  EXPECT_EQ(normalize_numbers("2100"), "twenty-one hundred");
  EXPECT_EQ(normalize_numbers("1905"), "nineteen oh five");
  EXPECT_EQ(normalize_numbers("2015"), "twenty fifteen");
  EXPECT_EQ(normalize_numbers("1066"), "ten sixty-six");
}

TEST(Numbers, Ordinals) {
  EXPECT_EQ(normalize_numbers("1st"), "first");
  EXPECT_EQ(normalize_numbers("2nd"), "second");
  EXPECT_EQ(normalize_numbers("3rd"), "third");
  EXPECT_EQ(normalize_numbers("4th"), "fourth");
  EXPECT_EQ(normalize_numbers("11th"), "eleventh");
  EXPECT_EQ(normalize_numbers("12th"), "twelfth");
  EXPECT_EQ(normalize_numbers("20th"), "twentieth");
  EXPECT_EQ(normalize_numbers("21st"), "twenty-first");
  EXPECT_EQ(normalize_numbers("58th"), "fifty-eighth");
  // The original called inflect with its default andword for ordinals.
  EXPECT_EQ(normalize_numbers("101st"), "one hundred and first");
  EXPECT_EQ(normalize_numbers("1005th"), "one thousand and fifth");
}

TEST(Numbers, Decimals) {
  EXPECT_EQ(normalize_numbers("3.14"), "three point fourteen");
  EXPECT_EQ(normalize_numbers("0.5"), "zero point five");
}

TEST(Numbers, Dollars) {
  EXPECT_EQ(normalize_numbers("$5"), "five dollars");
  EXPECT_EQ(normalize_numbers("$1"), "one dollar");
  EXPECT_EQ(normalize_numbers("$1.50"), "one dollar, fifty cents");
  EXPECT_EQ(normalize_numbers("$3.01"), "three dollars, one cent");
  EXPECT_EQ(normalize_numbers("$0.01"), "one cent");
  EXPECT_EQ(normalize_numbers("$0.00"), "zero dollars");
  EXPECT_EQ(normalize_numbers("$2,500"), "twenty-five hundred dollars");
  EXPECT_EQ(normalize_numbers("$1.2.3"), "one point two.three dollars");  // the original's fallback
}

TEST(Numbers, Pounds) {
  EXPECT_EQ(normalize_numbers("\xC2\xA3" "5"), "five pounds");
  EXPECT_EQ(normalize_numbers("\xC2\xA3" "1,000"), "one thousand pounds");
  EXPECT_EQ(expand_pounds("cost \xC2\xA3" "20 each"), "cost 20 pounds each");
}

TEST(Numbers, InSentences) {
  EXPECT_EQ(normalize_numbers("on the 3rd of may 1999, 12 men paid $3.50"),
            "on the third of may nineteen ninety-nine, twelve men paid three dollars, fifty cents");
  EXPECT_EQ(normalize_numbers("no digits here."), "no digits here.");
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
