// Transliteration to ASCII (the role unidecode plays in the original cleaners) for Latin-1,
// Latin Extended-A, the common Latin Extended-B letters, combining accents and general
// punctuation. Characters outside the table are left as they are, so that the symbol lookup
// reports them as unknown instead of guessing.
#pragma once

#include <string>

namespace monoflow::text {

// The ASCII replacement of one code point: the character itself for ASCII, "" for characters
// that transliterate to nothing (soft hyphen, zero-width space, combining accents), and
// nullptr when the table has no entry.
const char* ascii_for(char32_t c);

std::u32string transliterate_to_ascii(const std::u32string& text);

}  // namespace monoflow::text
