// UTF-8 <-> code points. Invalid bytes decode to U+FFFD so that they surface as unknown
// characters instead of vanishing.
#pragma once

#include <string>

namespace monoflow::text {

std::u32string utf8_decode(const std::string& s);
// Byte offset of the first byte that is not part of valid UTF-8 (a stray continuation byte,
// a truncated sequence, an overlong form, a surrogate, > U+10FFFF); npos when all is valid.
size_t first_invalid_utf8(const std::string& s);
std::string utf8_encode(const std::u32string& s);
std::string utf8_encode(char32_t c);
// "'é' (U+00E9)" style description of one code point, for messages.
std::string describe_code_point(char32_t c);

}  // namespace monoflow::text
