#include "data/text/cleaners.h"

#include <utility>

#include "common/error.h"
#include "data/text/numbers.h"
#include "data/text/transliterate.h"
#include "data/text/utf8.h"

namespace monoflow::text {
namespace {

char32_t to_lower(char32_t c) {
  if (c >= U'A' && c <= U'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;  // Latin-1
  if (c == 0x130) return U'i';                              // dotted capital I
  if (c >= 0x100 && c <= 0x137) return c | 1;               // Latin Extended-A pairs
  if (c >= 0x139 && c <= 0x148) return (c & 1) ? c + 1 : c;
  if (c >= 0x14A && c <= 0x177) return c | 1;
  if (c == 0x178) return 0xFF;
  if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;  // Greek
  if (c >= 0x410 && c <= 0x42F) return c + 32;                 // Cyrillic
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

// Python's str \s.
bool is_unicode_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_byte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c >= 0x80;  // non-ASCII left over is almost always a letter
}

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// The original list, in its order ("mrs" before "mr").
const std::pair<const char*, const char*> kAbbreviations[] = {
    {"mrs", "misess"},   {"mr", "mister"},     {"dr", "doctor"},     {"st", "saint"},
    {"co", "company"},   {"jr", "junior"},     {"maj", "major"},     {"gen", "general"},
    {"drs", "doctors"},  {"rev", "reverend"},  {"lt", "lieutenant"}, {"hon", "honorable"},
    {"sgt", "sergeant"}, {"capt", "captain"},  {"esq", "esquire"},   {"ltd", "limited"},
    {"col", "colonel"},  {"ft", "fort"}};

// \b<abbr>\. replaced case-insensitively.
std::string replace_abbreviation(const std::string& text, const std::string& abbr,
                                 const std::string& replacement) {
  std::string out;
  const size_t n = abbr.size();
  size_t i = 0;
  while (i < text.size()) {
    bool match = i + n < text.size() && text[i + n] == '.' &&
                 (i == 0 || !is_word_byte(static_cast<unsigned char>(text[i - 1])));
    for (size_t k = 0; match && k < n; ++k) {
      if (ascii_lower(text[i + k]) != abbr[k]) match = false;
    }
    if (match) {
      out += replacement;
      i += n + 1;
    } else {
      out.push_back(text[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace

std::string lowercase(const std::string& text) {
  std::u32string u = utf8_decode(text);
  for (auto& c : u) c = to_lower(c);
  return utf8_encode(u);
}

std::string collapse_whitespace(const std::string& text) {
  const std::u32string u = utf8_decode(text);
  std::u32string out;
  out.reserve(u.size());
  bool in_space = false;
  for (char32_t c : u) {
    if (is_unicode_space(c)) {
      if (!in_space) out.push_back(U' ');
      in_space = true;
    } else {
      out.push_back(c);
      in_space = false;
    }
  }
  return utf8_encode(out);
}

std::string convert_to_ascii(const std::string& text) {
  return utf8_encode(transliterate_to_ascii(utf8_decode(text)));
}

std::string expand_abbreviations(const std::string& text) {
  std::string out = text;
  for (const auto& [abbr, replacement] : kAbbreviations) {
    out = replace_abbreviation(out, abbr, replacement);
  }
  return out;
}

std::string basic_cleaners(const std::string& text) {
  return collapse_whitespace(lowercase(text));
}

std::string transliteration_cleaners(const std::string& text) {
  return collapse_whitespace(lowercase(convert_to_ascii(text)));
}

std::string english_cleaners(const std::string& text) {
  std::string t = convert_to_ascii(expand_pounds(text));
  t = lowercase(t);
  t = normalize_numbers(t);
  t = expand_abbreviations(t);
  return collapse_whitespace(t);
}

const std::vector<std::string>& known_cleaners() {
  static const std::vector<std::string> kNames = {"english_cleaners", "basic_cleaners",
                                                  "transliteration_cleaners"};
  return kNames;
}

void check_cleaner_names(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    bool known = false;
    for (const auto& k : known_cleaners()) known = known || k == name;
    if (!known) {
      std::string list;
      for (const auto& k : known_cleaners()) list += (list.empty() ? "" : ", ") + k;
      throw OptionError("data.text_cleaners", "unknown text cleaner '" + name + "'; known: " + list);
    }
  }
}

std::string run_cleaners(const std::string& text, const std::vector<std::string>& names) {
  check_cleaner_names(names);
  std::string t = text;
  for (const auto& name : names) {
    if (name == "english_cleaners") {
      t = english_cleaners(t);
    } else if (name == "basic_cleaners") {
      t = basic_cleaners(t);
    } else {
      t = transliteration_cleaners(t);
    }
  }
  return t;
}

}  // namespace monoflow::text
