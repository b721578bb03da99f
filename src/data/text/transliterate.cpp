#include "data/text/transliterate.h"

#include <unordered_map>

namespace monoflow::text {
namespace {

// U+00A0..U+00FF, in order.
const char* const kLatin1[96] = {
    " ",  "!",  "C/", "PS", "$?", "Y=", "|",  "SS", "\"", "(c)", "a", "<<", "!", "",  "(r)", "-",
    "deg", "+-", "2", "3",  "'",  "u",  "P",  "*",  ",",  "1",  "o",  ">>", " 1/4", " 1/2",
    " 3/4", "?",
    "A",  "A",  "A",  "A",  "A",  "A",  "AE", "C",  "E",  "E",  "E",  "E",  "I",  "I",  "I",  "I",
    "D",  "N",  "O",  "O",  "O",  "O",  "O",  "x",  "O",  "U",  "U",  "U",  "U",  "Y",  "Th", "ss",
    "a",  "a",  "a",  "a",  "a",  "a",  "ae", "c",  "e",  "e",  "e",  "e",  "i",  "i",  "i",  "i",
    "d",  "n",  "o",  "o",  "o",  "o",  "o",  "/",  "o",  "u",  "u",  "u",  "u",  "y",  "th", "y"};

// U+0100..U+017F, in order.
const char* const kLatinExtA[128] = {
    "A", "a", "A", "a", "A", "a", "C", "c", "C", "c", "C", "c", "C", "c", "D", "d",    // 0100
    "D", "d", "E", "e", "E", "e", "E", "e", "E", "e", "E", "e", "G", "g", "G", "g",    // 0110
    "G", "g", "G", "g", "H", "h", "H", "h", "I", "i", "I", "i", "I", "i", "I", "i",    // 0120
    "I", "i", "IJ", "ij", "J", "j", "K", "k", "k", "L", "l", "L", "l", "L", "l", "L",  // 0130
    "l", "L", "l", "N", "n", "N", "n", "N", "n", "'n", "NG", "ng", "O", "o", "O", "o", // 0140
    "O", "o", "OE", "oe", "R", "r", "R", "r", "R", "r", "S", "s", "S", "s", "S", "s",  // 0150
    "S", "s", "T", "t", "T", "t", "T", "t", "U", "u", "U", "u", "U", "u", "U", "u",    // 0160
    "U", "u", "U", "u", "W", "w", "Y", "y", "Y", "Z", "z", "Z", "z", "Z", "z", "s"};   // 0170

const std::unordered_map<char32_t, const char*>& other_table() {
  static const std::unordered_map<char32_t, const char*> kTable = {
      // Latin Extended-B letters common in European text.
      {0x0180, "b"}, {0x0192, "f"}, {0x01A0, "O"}, {0x01A1, "o"}, {0x01AF, "U"}, {0x01B0, "u"},
      {0x01CD, "A"}, {0x01CE, "a"}, {0x01CF, "I"}, {0x01D0, "i"}, {0x01D1, "O"}, {0x01D2, "o"},
      {0x01D3, "U"}, {0x01D4, "u"}, {0x01E6, "G"}, {0x01E7, "g"}, {0x01F8, "N"}, {0x01F9, "n"},
      {0x0218, "S"}, {0x0219, "s"}, {0x021A, "T"}, {0x021B, "t"}, {0x0237, "j"},
      // Spacing modifier letters.
      {0x02B9, "'"}, {0x02BA, "\""}, {0x02BB, "'"}, {0x02BC, "'"}, {0x02C6, "^"}, {0x02C7, "^"},
      {0x02D8, "^"}, {0x02DA, "o"}, {0x02DC, "~"},
      // General punctuation.
      {0x2000, " "}, {0x2001, " "}, {0x2002, " "}, {0x2003, " "}, {0x2004, " "}, {0x2005, " "},
      {0x2006, " "}, {0x2007, " "}, {0x2008, " "}, {0x2009, " "}, {0x200A, " "}, {0x200B, ""},
      {0x200C, ""}, {0x200D, ""}, {0x200E, ""}, {0x200F, ""}, {0x2010, "-"}, {0x2011, "-"},
      {0x2012, "-"}, {0x2013, "-"}, {0x2014, "--"}, {0x2015, "--"}, {0x2016, "||"},
      {0x2018, "'"}, {0x2019, "'"}, {0x201A, ","}, {0x201B, "'"}, {0x201C, "\""}, {0x201D, "\""},
      {0x201E, ",,"}, {0x201F, "\""}, {0x2020, "+"}, {0x2021, "++"}, {0x2022, "*"},
      {0x2024, "."}, {0x2025, ".."}, {0x2026, "..."}, {0x2027, "."}, {0x202F, " "},
      {0x2030, "%0"}, {0x2032, "'"}, {0x2033, "''"}, {0x2034, "'''"}, {0x2035, "`"},
      {0x2039, "<"}, {0x203A, ">"}, {0x2044, "/"}, {0x205F, " "}, {0x2060, ""}, {0xFEFF, ""},
      // Currency and letter-like symbols.
      {0x20AC, "EUR"}, {0x2122, "(tm)"}, {0x2116, "No"},
      // Ideographic space.
      {0x3000, " "},
  };
  return kTable;
}

}  // namespace

const char* ascii_for(char32_t c) {
  static thread_local char ascii[2] = {0, 0};
  if (c < 0x80) {
    ascii[0] = static_cast<char>(c);
    return ascii;
  }
  if (c >= 0xA0 && c <= 0xFF) return kLatin1[c - 0xA0];
  if (c >= 0x100 && c <= 0x17F) return kLatinExtA[c - 0x100];
  if (c >= 0x300 && c <= 0x36F) return "";  // combining diacritical marks
  const auto& table = other_table();
  auto it = table.find(c);
  return it == table.end() ? nullptr : it->second;
}

std::u32string transliterate_to_ascii(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(c);
      continue;
    }
    const char* a = ascii_for(c);
    if (a == nullptr) {
      out.push_back(c);
    } else {
      for (const char* p = a; *p; ++p) out.push_back(static_cast<char32_t>(*p));
    }
  }
  return out;
}

}  // namespace monoflow::text
