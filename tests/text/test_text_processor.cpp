#include <gtest/gtest.h>

#include <thread>

#include "common/error.h"
#include "data/text/text_processor.h"
#include "fixtures.h"

namespace monoflow::text {
namespace {

using testing::fixture;
using Ids = std::vector<int64_t>;

// english ids: " " 11, "a" 38, "b" 39, "d" 41, "e" 42, "h" 45, "i" 46, "l" 49, "o" 52, "r" 55,
// "w" 60, "," 6, "." 7; "@X" = 64 + index in the ARPAbet list.
TEST(TextProcessor, EnglishCharacters) {
  const TextProcessor tp(TextOptions{});
  EXPECT_EQ(tp.num_symbols(), 148u);
  EXPECT_EQ(tp.vocab_size(), 148u);
  EXPECT_EQ(tp.blank_id(), -1);
  EXPECT_EQ(tp.encode("Hello, world."), (Ids{45, 42, 49, 49, 52, 6, 11, 60, 52, 55, 49, 41, 7}));
  EXPECT_EQ(tp.encode("Dr. 2"), tp.encode("doctor two"));
  EXPECT_EQ(tp.encode(""), Ids{});
}

TEST(TextProcessor, CurlyBracesPassArpabetThrough) {
  const TextProcessor tp(TextOptions{});
  // "a " + {HH AW1} + " b"; @HH = 106, @AW1 = 82.
  EXPECT_EQ(tp.encode("A {HH AW1} b"), (Ids{38, 11, 106, 82, 11, 39}));
  EXPECT_EQ(tp.decode(tp.encode("A {HH AW1} b")), "a {HH AW1} b");
  // Symbols outside ARPAbet are dropped and counted with their "@".
  EXPECT_EQ(tp.encode("{HH XX9}"), (Ids{106}));
  EXPECT_EQ(tp.unknown_counts().at("@XX9"), 1);
}

TEST(TextProcessor, BlankIsInterspersedEverywhere) {
  TextOptions o;
  o.add_blank = true;
  const TextProcessor tp(o);
  EXPECT_EQ(tp.vocab_size(), 149u);
  EXPECT_EQ(tp.blank_id(), 148);
  EXPECT_EQ(tp.encode("ab"), (Ids{148, 38, 148, 39, 148}));
  EXPECT_EQ(tp.encode(""), (Ids{148}));
  EXPECT_EQ(tp.symbol(148), "<blank>");
  EXPECT_EQ(tp.id_of("<blank>"), 148);
  EXPECT_EQ(tp.decode(tp.encode("ab")), "ab");
  EXPECT_EQ(tp.describe(), "text: english symbols (148 + blank), cleaners [english_cleaners]");
  EXPECT_EQ(tp.tokens("a b"), (std::vector<std::string>{"<blank>", "a", "<blank>", " ",
                                                        "<blank>", "b", "<blank>"}));
}

TEST(TextProcessor, AddSpaceWrapsTheStrippedText) {
  TextOptions o;
  o.add_space = true;
  const TextProcessor tp(o);
  EXPECT_EQ(tp.encode("  hi \n"), (Ids{11, 45, 46, 11}));
}

TEST(TextProcessor, CmudictReplacesBareWordsOnly) {
  TextOptions o;
  o.cmudict_path = fixture("tiny_cmudict.txt");
  const TextProcessor tp(o);
  // HELLO = HH AH0 L OW1 -> 106 73 117 123; WORLD = W ER1 L D -> 144 98 117 90.
  const Ids hello{106, 73, 117, 123};
  const Ids world{144, 98, 117, 90};
  Ids expected = hello;
  expected.push_back(11);
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(tp.encode("Hello world"), expected);
  EXPECT_EQ(tp.decode(expected), "{HH AH0 L OW1} {W ER1 L D}");
  // As the original: a word with punctuation attached is not looked up, it is spelled.
  EXPECT_EQ(tp.encode("Hello, world."), (Ids{45, 42, 49, 49, 52, 6, 11, 60, 52, 55, 49, 41, 7}));
  // Unknown words are spelled; the trailing space of the last word is removed.
  EXPECT_EQ(tp.encode("cat dog"), (Ids{116, 70, 133, 11, 41, 52, 44}));
  // Curly braces still pass through.
  EXPECT_EQ(tp.encode("{K AE1 T}"), (Ids{116, 70, 133}));
  EXPECT_EQ(tp.describe(), "text: english symbols (148), cleaners [english_cleaners], cmudict " +
                               fixture("tiny_cmudict.txt") + " (6 words)");
}

TEST(TextProcessor, UnknownCharactersAreDroppedCountedAndReported) {
  TextProcessor tp(TextOptions{});
  // 中 and # have no symbol; "_" is the pad and never taken from text.
  EXPECT_EQ(tp.encode("a\xE4\xB8\xAD#b_#"), (Ids{38, 39}));
  const auto counts = tp.unknown_counts();
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts.at("#"), 2);
  EXPECT_EQ(counts.at("_"), 1);
  EXPECT_EQ(counts.at("\xE4\xB8\xAD"), 1);
  const std::string report = tp.unknown_report();
  EXPECT_NE(report.find("4 occurrence(s) of 3 character(s)"), std::string::npos) << report;
  EXPECT_NE(report.find("'#' (U+0023) x2"), std::string::npos) << report;
  EXPECT_NE(report.find("(U+4E2D) x1"), std::string::npos) << report;
  tp.reset_unknown();
  EXPECT_EQ(tp.unknown_report(), "");
}

TEST(TextProcessor, UnknownCharacterCanBeAnError) {
  TextOptions o;
  o.on_unknown_char = "error";
  const TextProcessor tp(o);
  EXPECT_EQ(tp.encode("ok"), (Ids{52, 48}));
  try {
    tp.encode("a#b");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("U+0023"), std::string::npos) << e.what();
  }
}

TEST(TextProcessor, CountsAreExactUnderConcurrentEncoding) {
  const TextProcessor tp(TextOptions{});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tp] {
      for (int i = 0; i < 250; ++i) tp.encode("a#");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(tp.unknown_counts().at("#"), 1000);
}

TEST(TextProcessor, ConfigurationErrorsAreUserErrors) {
  TextOptions bad_cleaner;
  bad_cleaner.cleaners = {"englsh_cleaners"};
  EXPECT_THROW(TextProcessor{bad_cleaner}, UserError);
  TextOptions bad_set;
  bad_set.symbols = "arpabet";
  try {
    TextProcessor tp(bad_set);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("known: english, ipa"), std::string::npos) << e.what();
  }
  TextOptions missing_dict;
  missing_dict.cmudict_path = fixture("no_such_cmudict.txt");
  EXPECT_THROW(TextProcessor{missing_dict}, FileError);
  TextOptions dict_with_ipa;
  dict_with_ipa.symbols = "ipa";
  dict_with_ipa.cmudict_path = fixture("tiny_cmudict.txt");
  EXPECT_THROW(TextProcessor{dict_with_ipa}, UserError);
}

TEST(TextProcessor, SymbolLookupForDebugging) {
  const TextProcessor tp(TextOptions{});
  EXPECT_EQ(tp.symbol(0), "_");
  EXPECT_EQ(tp.symbol(147), "@ZH");
  EXPECT_EQ(tp.id_of("@ZH"), 147);
  EXPECT_EQ(tp.id_of("<blank>"), -1);
  EXPECT_THROW(tp.symbol(148), UserError);
  EXPECT_EQ(tp.symbols().size(), 148u);
  EXPECT_EQ(tp.clean("Mr. Smith, 42"), "mister smith, forty-two");
  // Pads (0) and out-of-range ids are skipped by decode.
  EXPECT_EQ(tp.decode({0, 38, 0, 999, 39}), "ab");
}

}  // namespace
}  // namespace monoflow::text
