#include "data/text/phonemizer.h"

namespace monoflow::text {

bool is_kept_punctuation(char32_t c) {
  switch (c) {
    case U'!': case U'(': case U')': case U',': case U'.': case U':': case U';': case U'?':
    case U'"': case 0xA1: case 0xBF: case 0x2014: case 0x2026: case 0xAB: case 0xBB:
    case 0x201C: case 0x201D:
      return true;
    default:
      return false;
  }
}

}  // namespace monoflow::text
