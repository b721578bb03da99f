// Word timings of a synthesis, from the events espeak-ng reports while it speaks: the default
// corpus's reference alignment (scripts/make_corpus.sh writes words/<id>.tsv with them, and
// scripts/score_alignment.py scores align's TextGrids against them). Free of espeak-ng itself,
// so the rule is testable with made-up events.
#pragma once

#include <string>
#include <vector>

namespace monoflow::text {

// One event of espeak-ng's synthesis callback, as much of it as the rule needs.
struct SpeechEvent {
  enum class Kind { kWord, kPhoneme, kClauseEnd };
  Kind kind = Kind::kWord;
  int audio_ms = 0;       // espeak's audio_position: where the event falls in the output
  int text_position = 0;  // kWord: 1-based character index of the word in the text
  int length = 0;         // kWord: the word's length in characters (0: espeak's closing marker)
  std::string phoneme;    // kPhoneme: espeak's mnemonic ("t", "aI", "_:" ...; "_..." is a pause)
};

struct WordTiming {
  // The text's characters at the word event, as written ("7", "Dr"), whitespace trimmed.
  // espeak-ng speaks some words joined to the next and reports one event for both ("was the"
  // in "was the 3rd"): the entry then names both and spans both. The names are labels for
  // pairing only: inside numbers and after abbreviations espeak-ng reports one event per spoken
  // word at shifted text positions ("1998" gives "1998", "998.", "998."); the times still
  // mark its spoken words.
  std::string word;
  double start_s = 0, end_s = 0;
};

// The rule: a word starts at its word event's audio_position. espeak's word event carries the
// word's length in characters, not in time, so the end is the first pause phoneme ("_...") or
// clause end after the word's first sounding phoneme, else the next word's start, else the end
// of the audio (total_s). Word events of length 0 (espeak closes each text with one) are not
// words. Times are clamped to [0, total_s] and never decrease.
std::vector<WordTiming> word_timings(const std::vector<SpeechEvent>& events, const std::string& utf8_text,
                                     double total_s);

// "word\tstart_s\tend_s" header, then one word per line, times in seconds with 3 decimals.
std::string word_timings_tsv(const std::vector<WordTiming>& words);

}  // namespace monoflow::text
