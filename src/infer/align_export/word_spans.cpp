#include "infer/align_export/word_spans.h"

#include <cctype>
#include <sstream>
#include <utility>

namespace monoflow::train {
namespace {

bool sounding_char(unsigned char c) { return std::isalnum(c) || c >= 0x80; }

// Punctuation around a word, ASCII only: non-ASCII bytes may be part of a letter.
bool strip_char(unsigned char c) { return c < 0x80 && std::ispunct(c); }

struct Group {
  int64_t begin = 0, end = 0;  // frames of its spoken part
  std::string spelled;         // its spoken part's symbols
};

// The words of the token sequence: frame ranges of the spoken part of each run between
// separators, each with the blank right before its first spoken token and the blank right after
// its last one (add_blank): the model puts a sound's onset and tail there as much as in the
// letter, so a word without them starts late and ends early (docs/accuracy.md, "The blanks
// belong to their words": on one blank model, 50% of boundaries within 25 ms without them, 90%
// with).
std::vector<Group> groups_of(const std::vector<AlignedToken>& tokens) {
  const auto blank_at = [&](size_t i) { return i < tokens.size() && tokens[i].symbol == "<blank>"; };
  std::vector<Group> out;
  int64_t frame = 0;
  bool open = false;  // the current run has a spoken token
  Group g;
  std::string pending;  // symbols after the run's last spoken token so far (blanks, punctuation)
  for (size_t i = 0; i < tokens.size(); ++i) {
    const AlignedToken& t = tokens[i];
    if (t.separator) {
      if (open) out.push_back(g);
      open = false;
      pending.clear();
    } else if (t.spoken) {
      if (!open) {
        const int64_t lead = i > 0 && blank_at(i - 1) ? tokens[i - 1].frames : 0;
        g = Group{frame - lead, frame, ""};
        open = true;
      } else {
        g.spelled += pending;
      }
      pending.clear();
      g.spelled += t.symbol;
      // A later spoken token of the word moves the end again.
      g.end = frame + t.frames + (blank_at(i + 1) ? tokens[i + 1].frames : 0);
    } else if (open && t.symbol != "<blank>") {
      pending += t.symbol;  // inside a word ("don't") it is part of the spelling
    }
    frame += t.frames;
  }
  if (open) out.push_back(g);
  return out;
}

}  // namespace

// One table for both directions, so that a name and its rule cannot disagree.
constexpr std::pair<Junction, const char*> kJunctionNames[] = {
    {Junction::kMiddle, "middle"}, {Junction::kNextWord, "next"}, {Junction::kCentre, "centre"}};

std::optional<Junction> junction_named(const std::string& name) {
  for (const auto& [junction, known] : kJunctionNames) {
    if (name == known) return junction;
  }
  return std::nullopt;
}

const char* junction_name(Junction junction) {
  for (const auto& [known, name] : kJunctionNames) {
    if (known == junction) return name;
  }
  return "centre";  // unreachable: every Junction is in the table
}

std::vector<std::string> junction_names() {
  std::vector<std::string> names;
  for (const auto& [junction, name] : kJunctionNames) names.emplace_back(name);
  return names;
}

std::vector<std::string> words_of(const std::string& cleaned_text) {
  std::vector<std::string> out;
  std::istringstream in(cleaned_text);
  for (std::string w; in >> w;) {
    size_t b = 0, e = w.size();
    while (b < e && strip_char(static_cast<unsigned char>(w[b]))) ++b;
    while (e > b && strip_char(static_cast<unsigned char>(w[e - 1]))) --e;
    w = w.substr(b, e - b);
    bool sounds = false;
    for (const char c : w) sounds = sounds || sounding_char(static_cast<unsigned char>(c));
    if (sounds) out.push_back(w);
  }
  return out;
}

std::vector<FrameInterval> token_intervals(const std::vector<AlignedToken>& tokens) {
  std::vector<FrameInterval> out;
  int64_t frame = 0;
  for (const AlignedToken& t : tokens) {
    out.push_back({static_cast<double>(frame), static_cast<double>(frame + t.frames), t.symbol});
    frame += t.frames;
  }
  return out;
}

WordIntervals word_intervals(const std::vector<AlignedToken>& tokens, const std::vector<std::string>& words,
                             const WordSpanOptions& options) {
  int64_t total = 0;
  for (const AlignedToken& t : tokens) total += t.frames;
  std::vector<Group> groups = groups_of(tokens);
  WordIntervals r;
  r.words = static_cast<int64_t>(groups.size());
  r.labels_from_text = words.size() == groups.size();
  // Word edges in frames; short gaps: the words meet where the gap begins, or at its middle.
  std::vector<double> begin(groups.size()), end(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) begin[i] = groups[i].begin, end[i] = groups[i].end;
  for (size_t i = 0; i + 1 < groups.size(); ++i) {
    const int64_t gap = groups[i + 1].begin - groups[i].end;
    if (gap < options.min_pause_frames) {
      if (options.junction == Junction::kMiddle) end[i] += gap / 2;
      if (options.junction == Junction::kCentre) end[i] += 0.5 * gap;
      begin[i + 1] = end[i];
    }
  }
  double frame = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (begin[i] > frame) r.intervals.push_back({frame, begin[i], ""});
    r.intervals.push_back({begin[i], end[i], r.labels_from_text ? words[i] : groups[i].spelled});
    frame = end[i];
  }
  if (frame < total || r.intervals.empty()) r.intervals.push_back({frame, static_cast<double>(total), ""});
  return r;
}

}  // namespace monoflow::train
