// The text front-end: raw UTF-8 transcript -> token ids for the Glow-TTS encoder.
//
//   TextProcessor tp(TextOptions{...});      // from the config's data section
//   std::vector<int64_t> ids = tp.encode("Dr. Smith paid $5.");
//   int64_t n_vocab = tp.vocab_size();       // the model's n_vocab
//   ... after a pass over the corpus: if (!tp.unknown_report().empty()) warn(tp.unknown_report());
//
// Options: text_options.h (the config holds them as its Config::text).
//
// Behaviour follows the original Glow-TTS / keithito text pipeline (text_to_sequence with
// cleaners, optional CMUdict, curly-brace ARPAbet, add_space, add_blank). Encoding is const and
// thread-safe: several loader threads may share one TextProcessor. With the ipa set, curly
// braces have no special meaning (they are unknown characters). A text can encode to no ids
// at all (e.g. only unknown characters): callers treat an empty result as a bad line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/text/text_options.h"

namespace monoflow::text {

class SymbolTable;
class CmuDict;
class Phonemizer;
struct UnknownCounter;

class TextProcessor {
 public:
  // Throws UserError for an unknown cleaner or symbol-set name, a cmudict with the ipa set,
  // ipa without espeak-ng; FileError (file:line) for a missing or malformed cmudict file.
  explicit TextProcessor(TextOptions options);
  ~TextProcessor();
  TextProcessor(TextProcessor&&) noexcept;
  TextProcessor& operator=(TextProcessor&&) noexcept;

  // The full pipeline: add_space, curly-brace ARPAbet, cleaners, CMUdict / phonemizer,
  // symbol ids, add_blank.
  std::vector<int64_t> encode(const std::string& utf8_text) const;
  // The same, as symbol strings (blank shown as "<blank>"), for debugging.
  std::vector<std::string> tokens(const std::string& utf8_text) const;
  // Cleaners only.
  std::string clean(const std::string& utf8_text) const;
  // ids -> text as the original sequence_to_text: ARPAbet in braces, blanks and pads skipped.
  std::string decode(const std::vector<int64_t>& ids) const;

  size_t num_symbols() const;   // 148 for english
  size_t vocab_size() const;    // num_symbols() + (add_blank ? 1 : 0): the model's n_vocab
  int64_t pad_id() const { return 0; }
  int64_t blank_id() const;     // num_symbols() with add_blank, -1 otherwise
  const std::string& symbol(int64_t id) const;  // "<blank>" for the blank; UserError if out of range
  int64_t id_of(const std::string& symbol) const;  // -1 when absent
  // A token that makes a sound: a letter, digit, ARPAbet or IPA symbol (any non-ASCII byte);
  // not pad, blank, space or punctuation. UserError for an id outside the vocabulary.
  bool spoken(int64_t id) const;
  const std::vector<std::string>& symbols() const;
  const TextOptions& options() const { return options_; }
  // One line for logs: symbol set and size, blank, cleaners, dictionary, voice.
  std::string describe() const;

  // Characters (or "@X" ARPAbet / IPA symbols) dropped because they have no id, with counts,
  // accumulated over all encode() calls since construction or reset_unknown().
  std::map<std::string, int64_t> unknown_counts() const;
  // One line naming each dropped symbol with its code point and count; "" when none.
  std::string unknown_report() const;
  void reset_unknown();

 private:
  TextOptions options_;
  std::unique_ptr<SymbolTable> table_;
  std::unique_ptr<CmuDict> dict_;
  std::unique_ptr<Phonemizer> phonemizer_;
  std::unique_ptr<UnknownCounter> unknown_;
};

}  // namespace monoflow::text
