// espeak-ng phonemes: real phonemization when libespeak-ng is compiled in, a clear UserError
// when it is not. Each test skips itself in the other build.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "data/text/phonemizer.h"
#include "data/text/symbols.h"
#include "data/text/text_processor.h"

namespace monoflow::text {
namespace {

TextOptions ipa_options() {
  TextOptions o;
  o.symbols = "ipa";
  return o;
}

TEST(Phonemizer, SentenceBecomesKnownIpaSymbols) {
  if (!espeak_compiled_in()) GTEST_SKIP() << "built without libespeak-ng";
  const TextProcessor tp(ipa_options());
  EXPECT_EQ(tp.num_symbols(), SymbolTable::ipa().size());
  const auto ids = tp.encode("Hello, world! The quick brown fox jumps over the lazy dog.");
  ASSERT_GT(ids.size(), 30u);
  for (int64_t id : ids) {
    EXPECT_GT(id, 0);
    EXPECT_LT(id, static_cast<int64_t>(tp.num_symbols()));
  }
  EXPECT_TRUE(tp.unknown_counts().empty()) << tp.unknown_report();
  // Punctuation survives, in place, and stress marks are present.
  const auto tokens = tp.tokens("Hello, world!");
  EXPECT_EQ(tokens.back(), "!");
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), ","), tokens.end());
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), "\xCB\x88"), tokens.end());  // ˈ
  // Cleaners run first: the digits are words before espeak-ng sees them.
  EXPECT_EQ(tp.encode("2"), tp.encode("two"));
}

TEST(Phonemizer, PhonemesOfAWord) {
  if (!espeak_compiled_in()) GTEST_SKIP() << "built without libespeak-ng";
  const Phonemizer p("en-us");
  const std::string ph = p.phonemize("hello, world.");
  EXPECT_EQ(ph.substr(ph.size() - 1), ".");
  EXPECT_NE(ph.find(", "), std::string::npos) << ph;
  EXPECT_NE(ph.find("w\xCB\x88\xC9\x9C"), std::string::npos) << ph;  // wˈɜ of "world"
}

TEST(Phonemizer, ConcurrentCallsAgree) {
  if (!espeak_compiled_in()) GTEST_SKIP() << "built without libespeak-ng";
  const TextProcessor tp(ipa_options());
  const auto expected = tp.encode("Printing, in the only sense with which we are concerned.");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (tp.encode("Printing, in the only sense with which we are concerned.") != expected) {
          ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(Phonemizer, VoiceByLanguageAndNoLanguageSwitchMarks) {
  if (!espeak_compiled_in()) GTEST_SKIP() << "built without libespeak-ng";
  // "en-gb" is a language, not a voice file name: found through the voice properties.
  const std::string gb = Phonemizer("en-gb").phonemize("hello");
  EXPECT_NE(gb.find("\xC9\x99\xCA\x8A"), std::string::npos) << gb;  // əʊ, British
  const std::string us = Phonemizer("en-us").phonemize("hello");
  EXPECT_NE(us.find("o\xCA\x8A"), std::string::npos) << us;           // oʊ, American
  // French rules read "world" as English and espeak-ng marks the switch: "(en)...(fr)".
  const std::string fr = Phonemizer("fr").phonemize("hello world");
  EXPECT_FALSE(fr.empty());
  EXPECT_EQ(fr.find('('), std::string::npos) << fr;
}

TEST(Phonemizer, UnknownVoiceIsAUserError) {
  if (!espeak_compiled_in()) GTEST_SKIP() << "built without libespeak-ng";
  TextOptions o = ipa_options();
  o.espeak_voice = "xx-yy";  // neither a voice nor a language
  EXPECT_THROW(TextProcessor{o}, UserError);
  // A working voice still works afterwards.
  EXPECT_FALSE(TextProcessor(ipa_options()).encode("yes").empty());
}

TEST(Phonemizer, WithoutEspeakIpaIsAUserError) {
  if (espeak_compiled_in()) GTEST_SKIP() << "built with libespeak-ng";
  try {
    TextProcessor tp(ipa_options());
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("without libespeak-ng"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace monoflow::text
