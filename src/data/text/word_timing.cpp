#include "data/text/word_timing.h"

#include <algorithm>
#include <cstdio>

#include "data/text/utf8.h"

namespace monoflow::text {
namespace {

using Kind = SpeechEvent::Kind;

bool is_word(const SpeechEvent& e) { return e.kind == Kind::kWord && e.length > 0; }
bool is_pause(const SpeechEvent& e) { return e.kind == Kind::kPhoneme && !e.phoneme.empty() && e.phoneme[0] == '_'; }
bool is_sound(const SpeechEvent& e) { return e.kind == Kind::kPhoneme && !is_pause(e); }

std::string word_text(const std::u32string& text, const SpeechEvent& e) {
  const size_t from = e.text_position > 0 ? static_cast<size_t>(e.text_position - 1) : 0;
  if (from >= text.size()) return "";
  std::u32string w = text.substr(from, static_cast<size_t>(e.length));
  // Tabs and line breaks would break the TSV; the word is one line of text.
  for (char32_t& c : w) {
    if (c == U'\t' || c == U'\n' || c == U'\r') c = U' ';
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
    WordTiming w;
    w.word = word_text(text, events[i]);
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
