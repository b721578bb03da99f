#include "data/text/utf8.h"

#include <cstdio>

namespace monoflow::text {

namespace {

// Decodes the sequence starting at s[i] into *cp; returns its length, or 0 when the bytes
// there are not valid UTF-8.
int decode_one(const std::string& s, size_t i, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = 0;
  char32_t c = 0;
  if (b0 < 0x80) {
    len = 1;
    c = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    c = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    c = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    c = b0 & 0x07;
  }
  if (len == 0 || i + len > s.size()) return 0;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  // Reject overlong forms, surrogates and out-of-range values.
  if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
      (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) {
    return 0;
  }
  *cp = c;
  return len;
}

}  // namespace

std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const int len = decode_one(s, i, &cp);
    out.push_back(len > 0 ? cp : U'\uFFFD');
    i += len > 0 ? len : 1;
  }
  return out;
}

size_t first_invalid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const int len = decode_one(s, i, &cp);
    if (len == 0) return i;
    i += len;
  }
  return std::string::npos;
}

std::string utf8_encode(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return out;
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) out += utf8_encode(c);
  return out;
}

std::string describe_code_point(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  std::string shown = (c < 0x20 || c == 0x7F) ? std::string("\\x") + std::to_string(c) : utf8_encode(c);
  return "'" + shown + "' (" + buf + ")";
}

}  // namespace monoflow::text
