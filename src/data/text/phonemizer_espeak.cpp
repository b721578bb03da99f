// libespeak-ng backend of Phonemizer.
#include <espeak-ng/speak_lib.h>

#include <mutex>

#include "common/error.h"
#include "data/text/espeak_engine.h"
#include "data/text/phonemizer.h"
#include "data/text/utf8.h"

namespace monoflow::text {
namespace {

std::string trim_spaces(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// espeak-ng marks a switch to another language's rules inside the output, "(en)wˈɜːld(fr)":
// the marks are removed (kept punctuation never reaches espeak-ng, so no "(" is the text's).
std::string remove_language_marks(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '(') {
      const size_t close = s.find(')', i);
      if (close != std::string::npos) {
        i = close + 1;
        continue;
      }
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

// Phonemes of a piece of text without kept punctuation; clauses joined by one space.
std::string phonemize_piece_locked(const std::string& utf8) {
  std::string out;
  const void* ptr = utf8.c_str();
  while (ptr != nullptr) {
    const char* ph = espeak_TextToPhonemes(&ptr, espeakCHARS_UTF8, espeakPHONEMES_IPA);
    if (ph == nullptr) break;
    const std::string piece = trim_spaces(remove_language_marks(ph));
    if (piece.empty()) continue;
    if (!out.empty()) out += ' ';
    out += piece;
  }
  return out;
}

bool is_space32(char32_t c) { return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r'; }

}  // namespace

bool espeak_compiled_in() { return true; }

Phonemizer::Phonemizer(std::string voice) : voice_(std::move(voice)) {
  std::lock_guard<std::mutex> lock(espeak_mutex());
  espeak_use_voice_locked(voice_);
}

std::string Phonemizer::phonemize(const std::string& utf8_text) const {
  const std::u32string text = utf8_decode(utf8_text);
  std::lock_guard<std::mutex> lock(espeak_mutex());
  espeak_use_voice_locked(voice_);
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (is_kept_punctuation(text[i])) {
      out += utf8_encode(text[i]);
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && !is_kept_punctuation(text[j])) ++j;
    const std::u32string piece = text.substr(i, j - i);
    const bool lead = !piece.empty() && is_space32(piece.front());
    const bool trail = !piece.empty() && is_space32(piece.back());
    const std::string phonemes = phonemize_piece_locked(utf8_encode(piece));
    if (phonemes.empty()) {
      if ((lead || trail) && !out.empty() && out.back() != ' ') out += ' ';
    } else {
      if (lead && !out.empty() && out.back() != ' ') out += ' ';
      out += phonemes;
      if (trail) out += ' ';
    }
    i = j;
  }
  return out;
}

}  // namespace monoflow::text
