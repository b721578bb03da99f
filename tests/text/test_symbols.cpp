#include <gtest/gtest.h>

#include <set>

#include "data/text/symbols.h"

namespace monoflow::text {
namespace {

TEST(Symbols, EnglishSetIsTheOriginal148) {
  const SymbolTable t = SymbolTable::english();
  ASSERT_EQ(t.size(), 148u);
  EXPECT_EQ(t.id("_"), 0);
  EXPECT_EQ(t.id("-"), 1);
  EXPECT_EQ(t.id("!"), 2);
  EXPECT_EQ(t.id("'"), 3);
  EXPECT_EQ(t.id(","), 6);
  EXPECT_EQ(t.id("?"), 10);
  EXPECT_EQ(t.id(" "), 11);
  EXPECT_EQ(t.id("A"), 12);
  EXPECT_EQ(t.id("Z"), 37);
  EXPECT_EQ(t.id("a"), 38);
  EXPECT_EQ(t.id("z"), 63);
  EXPECT_EQ(t.id("@AA"), 64);
  EXPECT_EQ(t.id("@HH"), 106);
  EXPECT_EQ(t.id("@ZH"), 147);
  EXPECT_EQ(t.symbol(73), "@AH0");
  EXPECT_EQ(t.id("AA"), -1);  // ARPAbet only with its "@"
  EXPECT_EQ(t.id("#"), -1);
  EXPECT_THROW(t.symbol(148), std::out_of_range);
}

TEST(Symbols, ArpabetListMatchesCmudictValidSymbols) {
  const auto& a = arpabet_symbols();
  ASSERT_EQ(a.size(), 84u);
  EXPECT_EQ(a.front(), "AA");
  EXPECT_EQ(a[24], "B");
  EXPECT_EQ(a[42], "HH");
  EXPECT_EQ(a.back(), "ZH");
  EXPECT_EQ(std::set<std::string>(a.begin(), a.end()).size(), 84u);
  EXPECT_TRUE(is_arpabet_symbol("OW1"));
  EXPECT_FALSE(is_arpabet_symbol("OW3"));
}

TEST(Symbols, IpaSetHoldsEspeakPhonemesOnce) {
  const SymbolTable t = SymbolTable::ipa();
  EXPECT_EQ(t.size(), 182u);  // 1 pad + 20 punctuation + 52 letters + 88 IPA letters + 21 marks
  EXPECT_EQ(t.id("_"), 0);
  for (const char* s : {"\xC9\x99", "\xCB\x88", "\xCB\x8C", "\xCB\x90", "\xC9\xB9", "\xCA\x8A",
                        "\xC9\x9C", "\xC3\xB0", "\xCE\xB8", "\xC5\x8B", "\xE1\xB5\xBB", " ", ",",
                        ".", "a", "t"}) {
    EXPECT_GT(t.id(s), 0) << s;
  }
}

TEST(Symbols, DuplicatesAreRejected) {
  EXPECT_THROW(SymbolTable({"_", "a", "a"}), std::logic_error);
}

}  // namespace
}  // namespace monoflow::text
