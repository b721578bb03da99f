// UTF-8 <-> code points. Invalid bytes decode to U+FFFD so that they surface as unknown
// characters instead of vanishing.
#pragma once

#include <string>

namespace monoflow::text {

std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& s);
std::string utf8_encode(char32_t c);
// "'é' (U+00E9)" style description of one code point, for messages.
std::string describe_code_point(char32_t c);

}  // namespace monoflow::text
