// Token durations (frames per token, from MAS) -> the intervals of the token and word tiers, in
// frames. Pure bookkeeping: no model, no tensors, no files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace monoflow::train {

// One token of an utterance as the aligner saw it.
struct AlignedToken {
  std::string symbol;      // as TextProcessor::symbol ("a", " ", "@AH0", "<blank>")
  bool spoken = false;     // TextProcessor::spoken: a letter, digit, ARPAbet or IPA symbol
  bool separator = false;  // the space token, which separates words
  int64_t frames = 0;      // its duration
};

struct FrameInterval {
  // Frames [begin, end); whole for tokens, and for words but at a Junction::kCentre split of an
  // odd number of frames, which falls half a frame into the middle one.
  double begin = 0, end = 0;
  std::string label;  // "" for a pause
};

// Where two words meet when the frames between them (the space token, punctuation) are too few
// for a pause.
enum class Junction {
  kMiddle,    // they are split at their middle, rounded down to a frame boundary
  kNextWord,  // they are the next word's onset: the boundary is where they begin
  kCentre,    // they are split at their exact middle: half a frame into the middle one when odd
};

// "middle", "next", "centre" (align --junction); nullopt for another name.
std::optional<Junction> junction_named(const std::string& name);
// The name junction_named reads back.
const char* junction_name(Junction junction);
// Every name junction_named reads, in Junction's order (for option checks and error messages).
std::vector<std::string> junction_names();

struct WordSpanOptions {
  // Frames between two words that are not a word's sound (the space token, punctuation, blanks)
  // become a pause interval ("") when they last at least this long; shorter ones go to the two
  // words, which touch, as words do in connected speech, as `junction` says.
  int64_t min_pause_frames = 4;
  // kCentre, the default, splits them where the model's frames put the middle, without rounding
  // to the frame grid; kMiddle's rounding down moves the boundary of an odd count half a frame
  // earlier, which helps against espeak-ng's word events and Festival's segments and hurts
  // against the flite voices' segments, and kNextWord moves each boundary earlier by half those
  // frames (docs/accuracy.md, "Touching words at the exact middle", "Where touching words meet").
  Junction junction = Junction::kCentre;
};

// The cleaned text's words, as the word tier labels them: split at whitespace, leading and
// trailing punctuation removed ("world." -> "world"), pieces without a letter, digit or
// non-ASCII character ("--") dropped.
std::vector<std::string> words_of(const std::string& cleaned_text);

// One interval per token, labelled with its symbol, back to back from frame 0.
std::vector<FrameInterval> token_intervals(const std::vector<AlignedToken>& tokens);

struct WordIntervals {
  std::vector<FrameInterval> intervals;  // contiguous over [0, total frames): words and pauses
  int64_t words = 0;
  bool labels_from_text = true;  // false: `words` did not match the token groups (see below)
};

// The word tier. A word is a run of tokens between separators that holds a spoken token; its
// frames run from its first to its last spoken token, together with the blank right before the
// first and the blank right after the last (add_blank), so punctuation attached to a word
// ("world."), which tends to absorb the following silence, stays outside it. What lies between words is
// handled as WordSpanOptions says; what lies before the first and after the last word is a
// pause. Labels are `words` when there are as many as token groups; otherwise (a front-end that
// splits words differently from the text, e.g. espeak-ng joining "of the") the group's spoken
// symbols, joined.
WordIntervals word_intervals(const std::vector<AlignedToken>& tokens, const std::vector<std::string>& words,
                             const WordSpanOptions& options);

}  // namespace monoflow::train
