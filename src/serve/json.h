// The little JSON serve writes: strings escaped per RFC 8259, numbers, and arrays of them.
#pragma once

#include <cstdio>
#include <string>

namespace monoflow::serve {

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += ch;  // UTF-8 passes as it is
    }
  }
  return out + "\"";
}

// Six significant digits: a mel value's float32 precision is not needed to draw or compare it.
inline std::string json_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

}  // namespace monoflow::serve
