#include "data/text/numbers.h"

#include <cctype>
#include <vector>

namespace monoflow::text {
namespace {

const char* const kUnit[] = {"",     "one", "two",   "three", "four",
                             "five", "six", "seven", "eight", "nine"};
const char* const kTeen[] = {"ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                             "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
const char* const kTen[] = {"",      "",      "twenty",  "thirty", "forty",
                            "fifty", "sixty", "seventy", "eighty", "ninety"};
// inflect's `mill`: index 0 is a single space, the rest carry a leading space.
const char* const kMill[] = {" ",           " thousand",    " million",    " billion",
                             " trillion",   " quadrillion", " quintillion", " sextillion",
                             " septillion", " octillion",   " nonillion",  " decillion"};
constexpr int kMaxGroups = 12;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip_leading_zeros(const std::string& digits) {
  size_t i = 0;
  while (i < digits.size() && digits[i] == '0') ++i;
  return digits.substr(i);
}

// inflect tenfn(tens, units, mindex).
std::string tenfn(int tens, int units, int mindex) {
  if (tens != 1) {
    return std::string(kTen[tens]) + (tens && units ? "-" : "") + kUnit[units] + kMill[mindex];
  }
  return std::string(kTeen[units]) + kMill[mindex];
}

// inflect hundfn(hundreds, tens, units, mindex).
std::string hundfn(int h, int t, int u, int mindex, const std::string& andword) {
  if (h) {
    const std::string and_part = (t || u) ? " " + andword + " " : "";
    return std::string(kUnit[h]) + " hundred" + and_part + tenfn(t, u, 0) + kMill[mindex] + ", ";
  }
  if (t || u) return tenfn(t, u, 0) + kMill[mindex] + ", ";
  return "";
}

std::string collapse_spaces_and_strip(const std::string& s) {
  std::string out;
  bool in_space = false;
  for (char c : s) {
    if (is_space(c)) {
      in_space = true;
    } else {
      if (in_space && !out.empty()) out.push_back(' ');
      in_space = false;
      out.push_back(c);
    }
  }
  return out;
}

// inflect's WHITESPACES_COMMA: r"\s+," -> ",".
std::string join_space_before_comma(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ',') {
      while (!out.empty() && is_space(out.back())) out.pop_back();
    }
    out.push_back(c);
  }
  return out;
}

// inflect's COMMA_WORD: r", (\S+)\s+\Z" -> " <andword> \1".
std::string comma_word(const std::string& s, const std::string& andword) {
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  if (end == s.size() || end == 0) return s;  // needs trailing whitespace and a word
  size_t begin = end;
  while (begin > 0 && !is_space(s[begin - 1])) --begin;
  if (begin < 2 || s[begin - 2] != ',' || s[begin - 1] != ' ') return s;
  return s.substr(0, begin - 2) + " " + andword + " " + s.substr(begin, end - begin);
}

std::string digit_by_digit(const std::string& digits) {
  std::string out;
  for (char c : digits) {
    if (!out.empty()) out += ' ';
    out += c == '0' ? "zero" : kUnit[c - '0'];
  }
  return out;
}

}  // namespace

std::string cardinal_words(const std::string& digits_in, const std::string& andword) {
  const std::string digits = strip_leading_zeros(digits_in);
  if (digits.empty()) return "zero";
  if (digits == "1") return "one";
  const int n = static_cast<int>(digits.size());
  const int n_groups = (n + 2) / 3;
  if (n_groups > kMaxGroups) return digit_by_digit(digits);
  // Build inflect's enword string: groups of three from the right, the leftmost group of one or
  // two digits spelled with the thousands word of its position.
  std::vector<std::string> parts(n_groups);
  int pos = n;
  for (int g = 0; g < n_groups; ++g) {
    const int start = pos - 3;
    if (start >= 0) {
      parts[g] = hundfn(digits[start] - '0', digits[start + 1] - '0', digits[start + 2] - '0', g,
                        andword);
    } else if (pos == 2) {
      parts[g] = tenfn(digits[0] - '0', digits[1] - '0', g) + ", ";
    } else {
      parts[g] = std::string(kUnit[digits[0] - '0']) + kMill[g] + ", ";
    }
    pos = start;
  }
  std::string s;
  for (int g = n_groups - 1; g >= 0; --g) s += parts[g];
  if (s.size() >= 2 && s.compare(s.size() - 2, 2, ", ") == 0) s.resize(s.size() - 2);
  s = join_space_before_comma(s);
  s = comma_word(s, andword);
  return collapse_spaces_and_strip(s);
}

std::string ordinal_of(const std::string& phrase) {
  static const std::pair<const char*, const char*> kEndings[] = {
      {"ty", "tieth"},  {"one", "first"},   {"two", "second"}, {"three", "third"},
      {"five", "fifth"}, {"eight", "eighth"}, {"nine", "ninth"}, {"twelve", "twelfth"}};
  // inflect replaces the leftmost of these that ends the string; each possible ending is
  // matched by exactly one entry, so checking the suffix is the same.
  for (const auto& [end, repl] : kEndings) {
    const std::string e(end);
    if (phrase.size() >= e.size() && phrase.compare(phrase.size() - e.size(), e.size(), e) == 0) {
      return phrase.substr(0, phrase.size() - e.size()) + repl;
    }
  }
  return phrase + "th";
}

std::string expand_number(const std::string& digits_in) {
  const std::string digits = strip_leading_zeros(digits_in);
  if (digits.size() == 4) {
    const int num = std::stoi(digits);
    if (num > 1000 && num < 3000) {
      if (num == 2000) return "two thousand";
      if (num > 2000 && num < 2010) return "two thousand " + cardinal_words(digits.substr(3), "and");
      if (num % 100 == 0) return cardinal_words(digits.substr(0, 2), "and") + " hundred";
      // inflect group=2, zero="oh": two digits at a time.
      auto pair = [](int t, int u) -> std::string {
        if (t) return tenfn(t, u, 0);
        if (u) return std::string("oh ") + kUnit[u];
        return "oh oh";
      };
      return collapse_spaces_and_strip(pair(digits[0] - '0', digits[1] - '0') + " " +
                                       pair(digits[2] - '0', digits[3] - '0'));
    }
  }
  return cardinal_words(digits, "");
}

namespace {

// Calls `replace(match)` for each leftmost-longest match found by `match_at(text, i)`, which
// returns the match length at i (0: none), and splices the results in.
template <typename MatchAt, typename Replace>
std::string substitute(const std::string& text, MatchAt match_at, Replace replace) {
  std::string out;
  out.reserve(text.size() + 16);
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = match_at(text, i);
    if (len > 0) {
      out += replace(text.substr(i, len));
      i += len;
    } else {
      out.push_back(text[i]);
      ++i;
    }
  }
  return out;
}

// Length of the longest prefix of text[i..] made of digits and the given extra characters
// that ends in a digit (0 when none).
size_t run_ending_in_digit(const std::string& text, size_t i, const char* extra) {
  size_t j = i;
  size_t last_digit_end = 0;
  while (j < text.size()) {
    const char c = text[j];
    if (is_digit(c)) {
      ++j;
      last_digit_end = j;
    } else if (std::char_traits<char>::find(extra, std::char_traits<char>::length(extra), c)) {
      ++j;
    } else {
      break;
    }
  }
  return last_digit_end > i ? last_digit_end - i : 0;
}

size_t digit_run(const std::string& text, size_t i) {
  size_t j = i;
  while (j < text.size() && is_digit(text[j])) ++j;
  return j - i;
}

std::string remove_char(std::string s, char c) {
  std::string out;
  for (char x : s)
    if (x != c) out.push_back(x);
  return out;
}

std::string split_dot(const std::string& s, std::vector<std::string>* parts) {
  parts->clear();
  size_t start = 0;
  for (;;) {
    const size_t dot = s.find('.', start);
    parts->push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return s;
}

// Python int() then '%s': the decimal value without leading zeros. Commas cannot be parsed by
// the original (it raised); they are ignored here.
std::string int_string(const std::string& s) {
  std::string d = strip_leading_zeros(remove_char(s, ','));
  return d.empty() ? "0" : d;
}

bool is_zero(const std::string& s) { return int_string(s) == "0"; }

std::string expand_dollars(const std::string& match) {
  std::vector<std::string> parts;
  split_dot(match, &parts);
  if (parts.size() > 2) return match + " dollars";  // unexpected format, as the original
  const std::string dollars = parts[0].empty() ? "0" : int_string(parts[0]);
  const std::string cents = parts.size() > 1 && !parts[1].empty() ? int_string(parts[1]) : "0";
  const bool has_dollars = !is_zero(dollars);
  const bool has_cents = !is_zero(cents);
  const std::string dollar_unit = dollars == "1" ? "dollar" : "dollars";
  const std::string cent_unit = cents == "1" ? "cent" : "cents";
  if (has_dollars && has_cents) return dollars + " " + dollar_unit + ", " + cents + " " + cent_unit;
  if (has_dollars) return dollars + " " + dollar_unit;
  if (has_cents) return cents + " " + cent_unit;
  return "zero dollars";
}

const std::string kPound = "\xC2\xA3";  // U+00A3 in UTF-8

}  // namespace

std::string expand_pounds(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, kPound.size(), kPound) == 0) {
      const size_t len = run_ending_in_digit(text, i + kPound.size(), ",");
      if (len > 0) {
        out += text.substr(i + kPound.size(), len) + " pounds";
        i += kPound.size() + len;
        continue;
      }
    }
    out.push_back(text[i]);
    ++i;
  }
  return out;
}

std::string normalize_numbers(const std::string& text_in) {
  std::string text = text_in;
  // ([0-9][0-9\,]+[0-9]) -> commas removed
  text = substitute(
      text,
      [](const std::string& t, size_t i) -> size_t {
        if (!is_digit(t[i])) return 0;
        const size_t len = run_ending_in_digit(t, i, ",");
        return len >= 3 ? len : 0;
      },
      [](const std::string& m) { return remove_char(m, ','); });
  // £([0-9\,]*[0-9]+) -> "\1 pounds"
  text = expand_pounds(text);
  // \$([0-9\.\,]*[0-9]+) -> dollars and cents
  text = substitute(
      text,
      [](const std::string& t, size_t i) -> size_t {
        if (t[i] != '$') return 0;
        const size_t len = run_ending_in_digit(t, i + 1, ".,");
        return len > 0 ? len + 1 : 0;
      },
      [](const std::string& m) { return expand_dollars(m.substr(1)); });
  // ([0-9]+\.[0-9]+) -> "." read as " point "
  text = substitute(
      text,
      [](const std::string& t, size_t i) -> size_t {
        if (i > 0 && is_digit(t[i - 1])) return 0;  // a failed run is not retried mid-way
        const size_t a = digit_run(t, i);
        if (a == 0 || i + a >= t.size() || t[i + a] != '.') return 0;
        const size_t b = digit_run(t, i + a + 1);
        return b > 0 ? a + 1 + b : 0;
      },
      [](const std::string& m) {
        const size_t dot = m.find('.');
        return m.substr(0, dot) + " point " + m.substr(dot + 1);
      });
  // [0-9]+(st|nd|rd|th) -> ordinal words (inflect's default "and")
  text = substitute(
      text,
      [](const std::string& t, size_t i) -> size_t {
        if (i > 0 && is_digit(t[i - 1])) return 0;
        const size_t a = digit_run(t, i);
        if (a == 0 || i + a + 2 > t.size()) return 0;
        const std::string suffix = t.substr(i + a, 2);
        return (suffix == "st" || suffix == "nd" || suffix == "rd" || suffix == "th") ? a + 2 : 0;
      },
      [](const std::string& m) {
        return ordinal_of(cardinal_words(m.substr(0, m.size() - 2), "and"));
      });
  // [0-9]+ -> cardinal / year words
  text = substitute(
      text, [](const std::string& t, size_t i) -> size_t { return digit_run(t, i); },
      [](const std::string& m) { return expand_number(m); });
  return text;
}

}  // namespace monoflow::text
