// Symbol inventories and their ids. The id of a symbol is its index in the list; the order of
// the english set is the original Glow-TTS symbols.py order (weights depend on it).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace monoflow::text {

// The 84 ARPAbet symbols of the original cmudict.py valid_symbols, in that order.
const std::vector<std::string>& arpabet_symbols();
bool is_arpabet_symbol(const std::string& s);

class SymbolTable {
 public:
  // pad "_", "-", the punctuation "!'(),.:;? ", A-Z, a-z, then "@" + each ARPAbet symbol: 148.
  static SymbolTable english();
  // pad "_", punctuation, A-Z, a-z and the IPA letters and marks espeak-ng emits (one code
  // point per symbol).
  static SymbolTable ipa();

  explicit SymbolTable(std::vector<std::string> symbols);
  size_t size() const { return symbols_.size(); }
  int64_t id(const std::string& symbol) const;  // -1 when absent
  const std::string& symbol(int64_t id) const;  // std::out_of_range outside [0, size())
  const std::vector<std::string>& list() const { return symbols_; }

 private:
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace monoflow::text
