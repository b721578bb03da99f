#include <gtest/gtest.h>

#include "common/error.h"
#include "data/text/cleaners.h"
#include "data/text/transliterate.h"
#include "data/text/utf8.h"

namespace monoflow::text {
namespace {

TEST(Transliterate, LatinLettersAndPunctuation) {
  EXPECT_EQ(convert_to_ascii("caf\xC3\xA9"), "cafe");                          // é
  EXPECT_EQ(convert_to_ascii("Stra\xC3\x9F" "e"), "Strasse");                  // ß
  EXPECT_EQ(convert_to_ascii("\xE2\x80\x9Cquoted\xE2\x80\x9D"), "\"quoted\"");  // “ ”
  EXPECT_EQ(convert_to_ascii("it\xE2\x80\x99s"), "it's");                      // ’
  EXPECT_EQ(convert_to_ascii("a\xE2\x80\x93" "b"), "a-b");                     // en dash
  EXPECT_EQ(convert_to_ascii("a\xE2\x80\x94" "b"), "a--b");                    // em dash, as unidecode
  EXPECT_EQ(convert_to_ascii("wait\xE2\x80\xA6"), "wait...");                  // …
  EXPECT_EQ(convert_to_ascii("\xC3\x86r\xC3\xB8"), "AEro");                    // Ærø
  EXPECT_EQ(convert_to_ascii("\xC5\x81\xC3\xB3" "d\xC5\xBA"), "Lodz");         // Łódź
  EXPECT_EQ(convert_to_ascii("\xC5\x92uvre"), "OEuvre");                       // Œ
  EXPECT_EQ(convert_to_ascii("na\xC3\xAFve fa\xC3\xA7" "ade"), "naive facade");
  EXPECT_EQ(convert_to_ascii("a\xC2\xA0" "b"), "a b");                         // no-break space
  EXPECT_EQ(convert_to_ascii("e\xCC\x81"), "e");                               // e + combining acute
  EXPECT_EQ(convert_to_ascii("\xC8\x98" "tefan"), "Stefan");                   // Ș
  EXPECT_EQ(convert_to_ascii("\xC2\xBF" "Qu\xC3\xA9?"), "?Que?");              // ¿
}

TEST(Transliterate, UnknownCharactersStay) {
  EXPECT_EQ(convert_to_ascii("\xE4\xB8\xAD"), "\xE4\xB8\xAD");  // 中: no entry, left for reporting
  EXPECT_EQ(ascii_for(0x4E2D), nullptr);
  EXPECT_STREQ(ascii_for(0xFF), "y");
  EXPECT_STREQ(ascii_for(0x17F), "s");
  EXPECT_STREQ(ascii_for(0xAD), "");
}

TEST(Utf8, RoundTripAndInvalidBytes) {
  const std::string s = "a\xC3\xA9\xE2\x80\x94\xF0\x9F\x98\x80";
  const std::u32string u = utf8_decode(s);
  ASSERT_EQ(u.size(), 4u);
  EXPECT_EQ(u[1], 0xE9u);
  EXPECT_EQ(u[2], 0x2014u);
  EXPECT_EQ(u[3], 0x1F600u);
  EXPECT_EQ(utf8_encode(u), s);
  EXPECT_EQ(utf8_decode("a\xFF" "b"), (std::u32string{U'a', 0xFFFD, U'b'}));
  EXPECT_EQ(describe_code_point(0xE9), "'\xC3\xA9' (U+00E9)");
}

TEST(Utf8, FirstInvalidByte) {
  EXPECT_EQ(first_invalid_utf8("a\xC3\xA9\xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(first_invalid_utf8("ab\xFF"), 2u);                   // never valid
  EXPECT_EQ(first_invalid_utf8("caf\xC3"), 3u);                  // truncated sequence
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);                  // overlong '/'
  EXPECT_EQ(first_invalid_utf8("x\xED\xA0\x80"), 1u);             // a surrogate
}

TEST(Cleaners, Steps) {
  EXPECT_EQ(lowercase("HeLLo \xC3\x89" "COLE \xC5\x81"), "hello \xC3\xA9" "cole \xC5\x82");
  EXPECT_EQ(collapse_whitespace("a \n\t b  c"), "a b c");
  EXPECT_EQ(collapse_whitespace(" a "), " a ");  // ends are not stripped, as the original
  EXPECT_EQ(expand_abbreviations("mr. and mrs. smith"), "mister and misess smith");
  EXPECT_EQ(expand_abbreviations("Dr. Who met gen. lee at ft. worth"),
            "doctor Who met general lee at fort worth");
  EXPECT_EQ(expand_abbreviations("drs. jr. maj. rev. lt. hon. sgt. capt. esq. ltd. col. co. st."),
            "doctors junior major reverend lieutenant honorable sergeant captain esquire limited "
            "colonel company saint");
  EXPECT_EQ(expand_abbreviations("bmr. mr"), "bmr. mr");  // needs a word start and the dot
}

TEST(Cleaners, Pipelines) {
  EXPECT_EQ(basic_cleaners("Hello   World\t!"), "hello world !");
  EXPECT_EQ(basic_cleaners("\xC3\x89" "COLE"), "\xC3\xA9" "cole");  // no transliteration
  EXPECT_EQ(transliteration_cleaners("\xC3\x89lan  VITAL"), "elan vital");
  EXPECT_EQ(english_cleaners("In 1999, Dr. Smith paid $3.50 for 2 tickets."),
            "in nineteen ninety-nine, doctor smith paid three dollars, fifty cents for two "
            "tickets.");
  EXPECT_EQ(english_cleaners("Mr.  Caf\xC3\xA9 \xE2\x80\x94 the 21st"), "mister cafe -- the twenty-first");
  EXPECT_EQ(english_cleaners("It cost \xC2\xA3" "5."), "it cost five pounds.");
  EXPECT_EQ(run_cleaners("A  B", {"basic_cleaners"}), "a b");
  EXPECT_EQ(run_cleaners("A  B", {}), "A  B");
}

TEST(Cleaners, UnknownNameIsAUserError) {
  try {
    run_cleaners("x", {"english_cleaners", "german_cleaners"});
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'german_cleaners'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("english_cleaners, basic_cleaners, transliteration_cleaners"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace monoflow::text
