// Text -> speech with libespeak-ng, with the word timings of that very synthesis: how the
// default corpus is rendered (tools/speak, called by scripts/make_corpus.sh), so that its
// reference word boundaries match its audio exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/text/word_timing.h"

namespace monoflow::text {

struct SpeakOptions {
  std::string voice = "en-us";  // a voice name or a language, as espeak-ng -v takes
  int words_per_minute = 160;   // espeak-ng -s
};

struct Speech {
  std::vector<int16_t> samples;  // mono
  int sample_rate = 0;           // espeak-ng's own (22050)
  std::vector<WordTiming> words;
};

// UserError when espeak-ng is not compiled in, cannot start, has no such voice, the rate is
// outside espeak-ng's 80..450, or the synthesis fails.
Speech speak(const std::string& utf8_text, const SpeakOptions& options);

}  // namespace monoflow::text
