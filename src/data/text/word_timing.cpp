#include "data/text/word_timing.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "data/text/utf8.h"

namespace monoflow::text {
namespace {

using Kind = SpeechEvent::Kind;

bool is_word(const SpeechEvent& e) { return e.kind == Kind::kWord && e.length > 0; }
bool is_pause(const SpeechEvent& e) { return e.kind == Kind::kPhoneme && !e.phoneme.empty() && e.phoneme[0] == '_'; }
bool is_sound(const SpeechEvent& e) { return e.kind == Kind::kPhoneme && !is_pause(e); }

bool is_space(char32_t c) { return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r'; }
bool letter_or_digit(char32_t c) { return c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : c > 0xBF; }

// The word's characters: `length` of them from its position, extended over words espeak-ng spoke
// joined to it without an event of their own ("was the" in "was the 3rd"): up to the last
// letter or digit before the next word event's position.
std::string word_text(const std::u32string& text, const SpeechEvent& e, int next_position) {
  size_t from = e.text_position > 0 ? static_cast<size_t>(e.text_position - 1) : 0;
  if (from >= text.size()) return "";
  size_t to = std::min(text.size(), from + static_cast<size_t>(e.length));
  // Where a later word starts (the text's end after the last word); no extension when espeak-ng
  // reports a later word at an earlier position (it does inside some numbers: "1,250").
  size_t next = to;
  if (next_position == 0) {
    next = text.size();
  } else if (next_position > e.text_position) {
    next = std::min(text.size(), static_cast<size_t>(next_position - 1));
  }
  for (size_t i = to; i < next; ++i) {
    if (letter_or_digit(text[i])) to = i + 1;
  }
  // Whitespace trimmed (espeak-ng's positions and lengths are off by a character or two after
  // abbreviations and inside numbers: " and" in "Mr. and", "2 " for the "two" of "42").
  while (from < to && is_space(text[from])) ++from;
  while (to > from && is_space(text[to - 1])) --to;
  std::u32string w = text.substr(from, to - from);
  // Tabs and line breaks would break the TSV; the word is one line of text.
  for (char32_t& c : w) {
    if (is_space(c)) c = U' ';
  }
  return utf8_encode(w);
}

}  // namespace

std::vector<WordTiming> word_timings(const std::vector<SpeechEvent>& events, const std::string& utf8_text,
                                     double total_s) {
  const std::u32string text = utf8_decode(utf8_text);
  std::vector<WordTiming> out;
  for (size_t i = 0; i < events.size(); ++i) {
    if (!is_word(events[i])) continue;
    int next_position = 0;  // 0: no later word: the text's end
    for (size_t j = i + 1; j < events.size() && next_position == 0; ++j) {
      if (is_word(events[j])) next_position = events[j].text_position;
    }
    WordTiming w;
    w.word = word_text(text, events[i], next_position);
    w.start_s = events[i].audio_ms / 1000.0;
    w.end_s = total_s;
    bool sounded = false;
    for (size_t j = i + 1; j < events.size(); ++j) {
      const SpeechEvent& e = events[j];
      if (is_word(e)) {
        w.end_s = e.audio_ms / 1000.0;
        break;
      }
      if (is_sound(e)) sounded = true;
      if (sounded && (is_pause(e) || e.kind == Kind::kClauseEnd)) {
        w.end_s = e.audio_ms / 1000.0;
        break;
      }
    }
    out.push_back(std::move(w));
  }
  double floor = 0;
  for (WordTiming& w : out) {
    w.start_s = std::clamp(w.start_s, floor, total_s);
    w.end_s = std::clamp(w.end_s, w.start_s, total_s);
    floor = w.start_s;
  }
  return out;
}

std::string word_timings_tsv(const std::vector<WordTiming>& words) {
  std::string out = "word\tstart_s\tend_s\n";
  char times[64];
  for (const WordTiming& w : words) {
    std::snprintf(times, sizeof times, "\t%.3f\t%.3f\n", w.start_s, w.end_s);
    out += w.word + times;
  }
  return out;
}

}  // namespace monoflow::text
