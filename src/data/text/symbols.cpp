#include "data/text/symbols.h"

#include <stdexcept>
#include <unordered_set>

#include "data/text/utf8.h"

namespace monoflow::text {

const std::vector<std::string>& arpabet_symbols() {
  static const std::vector<std::string> kSymbols = {
      "AA",  "AA0", "AA1", "AA2", "AE",  "AE0", "AE1", "AE2", "AH",  "AH0", "AH1", "AH2",
      "AO",  "AO0", "AO1", "AO2", "AW",  "AW0", "AW1", "AW2", "AY",  "AY0", "AY1", "AY2",
      "B",   "CH",  "D",   "DH",  "EH",  "EH0", "EH1", "EH2", "ER",  "ER0", "ER1", "ER2",
      "EY",  "EY0", "EY1", "EY2", "F",   "G",   "HH",  "IH",  "IH0", "IH1", "IH2", "IY",
      "IY0", "IY1", "IY2", "JH",  "K",   "L",   "M",   "N",   "NG",  "OW",  "OW0", "OW1",
      "OW2", "OY",  "OY0", "OY1", "OY2", "P",   "R",   "S",   "SH",  "T",   "TH",  "UH",
      "UH0", "UH1", "UH2", "UW",  "UW0", "UW1", "UW2", "V",   "W",   "Y",   "Z",   "ZH"};
  return kSymbols;
}

bool is_arpabet_symbol(const std::string& s) {
  static const std::unordered_set<std::string> kSet(arpabet_symbols().begin(),
                                                    arpabet_symbols().end());
  return kSet.count(s) > 0;
}

namespace {

void add_chars(std::vector<std::string>& out, const std::u32string& chars) {
  for (char32_t c : chars) out.push_back(utf8_encode(c));
}

const std::u32string kLetters = U"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

}  // namespace

SymbolTable SymbolTable::english() {
  std::vector<std::string> s{"_", "-"};
  add_chars(s, U"!'(),.:;? ");
  add_chars(s, kLetters);
  for (const auto& a : arpabet_symbols()) s.push_back("@" + a);
  return SymbolTable(std::move(s));
}

SymbolTable SymbolTable::ipa() {
  std::vector<std::string> s{"_"};
  // Punctuation kept through phonemization, then space.
  add_chars(s, U"-!'(),.:;?\u00A1\u00BF\u2014\u2026\"\u00AB\u00BB\u201C\u201D ");
  add_chars(s, kLetters);
  // IPA letters (espeak-ng's inventory across its languages, plus the usual extra letters).
  add_chars(s,
            U"\u00E6\u00E7\u00F0\u00F8\u0127\u014B\u0153\u01C0\u01C1\u01C2\u01C3"  // æçðøħŋœǀǁǂǃ
            U"\u0250\u0251\u0252\u0253\u0254\u0255\u0256\u0257\u0258\u0259\u025A"   // ɐɑɒɓɔɕɖɗɘəɚ
            U"\u025B\u025C\u025D\u025E\u025F\u0260\u0261\u0262\u0263\u0264\u0265"   // ɛɜɝɞɟɠɡɢɣɤɥ
            U"\u0266\u0267\u0268\u026A\u026B\u026C\u026D\u026E\u026F\u0270\u0271"   // ɦɧɨɪɫɬɭɮɯɰɱ
            U"\u0272\u0273\u0274\u0275\u0276\u0278\u0279\u027A\u027B\u027D\u027E"   // ɲɳɴɵɶɸɹɺɻɽɾ
            U"\u0280\u0281\u0282\u0283\u0284\u0288\u0289\u028A\u028B\u028C\u028D"   // ʀʁʂʃʄʈʉʊʋʌʍ
            U"\u028E\u028F\u0290\u0291\u0292\u0294\u0295\u0298\u0299\u029B\u029C"   // ʎʏʐʑʒʔʕʘʙʛʜ
            U"\u029D\u029F\u02A1\u02A2\u02A4\u02A7\u03B2\u03B8\u03C7\u1D7B\u2C71");  // ʝʟʡʢʤʧβθχᵻⱱ
  // Suprasegmentals, diacritics and tone arrows: stress, length, syllabic, nasal, tie...
  add_chars(s,
            U"\u02C8\u02CC\u02D0\u02D1\u02BC\u02B0\u02B1\u02B2\u02B7\u02E0\u02E4\u02DE"  // ˈˌːˑʼʰʱʲʷˠˤ˞
            U"\u0303\u0329\u030A\u0361\u2191\u2193\u2192\u2197\u2198");                  // ̃ ̩ ̊ ͡ ↑↓→↗↘
  return SymbolTable(std::move(s));
}

SymbolTable::SymbolTable(std::vector<std::string> symbols) : symbols_(std::move(symbols)) {
  for (size_t i = 0; i < symbols_.size(); ++i) {
    if (!ids_.emplace(symbols_[i], static_cast<int64_t>(i)).second) {
      throw std::logic_error("duplicate symbol in a symbol table: " + symbols_[i]);
    }
  }
}

int64_t SymbolTable::id(const std::string& symbol) const {
  auto it = ids_.find(symbol);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& SymbolTable::symbol(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(symbols_.size())) {
    throw std::out_of_range("symbol id " + std::to_string(id) + " outside [0, " +
                            std::to_string(symbols_.size()) + ")");
  }
  return symbols_[static_cast<size_t>(id)];
}

}  // namespace monoflow::text
