// Text -> IPA phonemes through libespeak-ng (espeak_TextToPhonemes, IPA mode). libespeak-ng
// keeps global state and is not thread-safe: every call is serialised by one process-wide
// mutex. Punctuation is kept: the text is cut at punctuation marks, each piece is phonemized
// and the marks are put back in place ("hello, world." -> "həlˈoʊ, wˈɜːld.").
#pragma once

#include <string>

namespace monoflow::text {

// True when monoflow was built with libespeak-ng (MONOFLOW_ESPEAK_ENABLED).
bool espeak_compiled_in();

class Phonemizer {
 public:
  // UserError when espeak-ng is not compiled in, cannot be initialised, or has no such voice.
  explicit Phonemizer(std::string voice = "en-us");
  std::string phonemize(const std::string& utf8_text) const;
  const std::string& voice() const { return voice_; }

 private:
  std::string voice_;
};

// True for the marks kept through phonemization: ! ( ) , . : ; ? ¡ ¿ — … " « » “ ”
// (apostrophes and hyphens stay inside words and go to espeak-ng).
bool is_kept_punctuation(char32_t c);

}  // namespace monoflow::text
