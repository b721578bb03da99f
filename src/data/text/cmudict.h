// A CMUdict-format pronunciation dictionary (cmudict-0.7b): "WORD  PH1 PH2 ..." with an
// upper-case word (or one starting with "'"), two spaces, ARPAbet symbols; "WORD(2)" adds an
// alternative pronunciation; other lines (";;;" comments, punctuation entries) are skipped, as
// the original cmudict.py does. Read as Latin-1, as the original.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace monoflow::text {

class CmuDict {
 public:
  // FileError when the file cannot be read, when an entry line has no pronunciation
  // (file:line), or when it holds no entry at all (e.g. the lower-case cmudict.dict format).
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
