// String helpers the text readers share (manifests, CMUdict, TextGrids).
#pragma once

#include <string>
#include <string_view>

namespace monoflow {

// `s` without leading and trailing whitespace (space, tab, CR, LF, FF, VT), as Python's
// str.strip(), which the original recipes apply to every line they read.
inline std::string trim(std::string_view s) {
  constexpr std::string_view kWhitespace = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(kWhitespace) - b + 1));
}

}  // namespace monoflow
