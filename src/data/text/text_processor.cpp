#include "data/text/text_processor.h"

#include <cctype>
#include <mutex>

#include "common/error.h"
#include "data/text/cleaners.h"
#include "data/text/cmudict.h"
#include "data/text/intersperse.h"
#include "data/text/phonemizer.h"
#include "data/text/symbols.h"
#include "data/text/utf8.h"

namespace monoflow::text {

struct UnknownCounter {
  mutable std::mutex mutex;
  std::map<std::string, int64_t> counts;
};

namespace {

const std::string kBlankName = "<blank>";

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string describe_symbol(const std::string& s) {
  const std::u32string u = utf8_decode(s);
  if (u.size() == 1) return describe_code_point(u[0]);
  return "'" + s + "'";
}

// Token ids of one encode() call, with the symbols it had to drop.
class Encoder {
 public:
  Encoder(const SymbolTable& table, bool error_on_unknown, const std::string& set_name)
      : table_(table), error_(error_on_unknown), set_name_(set_name) {}

  // One id per code point; the pad "_" and "~" are never taken from text (as the original).
  void characters(const std::string& utf8) {
    for (char32_t c : utf8_decode(utf8)) symbol(utf8_encode(c));
  }
  void symbol(const std::string& s) {
    const int64_t id = (s == "_" || s == "~") ? -1 : table_.id(s);
    if (id >= 0) {
      ids.push_back(id);
      return;
    }
    if (error_) {
      throw UserError("text: no symbol for " + describe_symbol(s) + " in the " + set_name_ +
                      " symbol set");
    }
    ++dropped[s];
  }
  // Whitespace-separated ARPAbet, as the original _arpabet_to_sequence.
  void arpabet(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      size_t j = i;
      while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (j > i) symbol("@" + text.substr(i, j - i));
      i = j;
    }
  }

  std::vector<int64_t> ids;
  std::map<std::string, int64_t> dropped;

 private:
  const SymbolTable& table_;
  bool error_;
  std::string set_name_;
};

// The original's _curly_re = (.*?)\{(.+?)\}(.*): text before the first "{", the text up to
// the next "}" (at least one character), and the rest.
bool split_curly(const std::string& text, std::string* before, std::string* inside,
                 std::string* after) {
  const size_t open = text.find('{');
  if (open == std::string::npos) return false;
  const size_t close = text.find('}', open + 2);
  if (close == std::string::npos) return false;
  *before = text.substr(0, open);
  *inside = text.substr(open + 1, close - open - 1);
  *after = text.substr(close + 1);
  return true;
}

std::vector<std::string> split_on_space(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t sp = s.find(' ', start);
    out.push_back(s.substr(start, sp == std::string::npos ? std::string::npos : sp - start));
    if (sp == std::string::npos) return out;
    start = sp + 1;
  }
}

}  // namespace

TextProcessor::TextProcessor(TextOptions options)
    : options_(std::move(options)), unknown_(std::make_unique<UnknownCounter>()) {
  options_.validate();
  if (options_.symbols == "english") {
    table_ = std::make_unique<SymbolTable>(SymbolTable::english());
    if (!options_.cmudict_path.empty()) dict_ = std::make_unique<CmuDict>(options_.cmudict_path);
  } else {  // ipa
    table_ = std::make_unique<SymbolTable>(SymbolTable::ipa());
    phonemizer_ = std::make_unique<Phonemizer>(options_.espeak_voice);
  }
}

TextProcessor::~TextProcessor() = default;
TextProcessor::TextProcessor(TextProcessor&&) noexcept = default;
TextProcessor& TextProcessor::operator=(TextProcessor&&) noexcept = default;

std::string TextProcessor::clean(const std::string& text) const {
  return run_cleaners(text, options_.cleaners);
}

std::vector<int64_t> TextProcessor::encode(const std::string& utf8_text) const {
  std::string text = utf8_text;
  if (options_.add_space) text = " " + strip(text) + " ";
  Encoder enc(*table_, options_.on_unknown_char == "error", options_.symbols);

  if (phonemizer_) {
    std::string phonemes = phonemizer_->phonemize(clean(text));
    if (options_.add_space) phonemes = " " + strip(phonemes) + " ";
    enc.characters(phonemes);
  } else {
    const int64_t space = table_->id(" ");
    std::string before, inside, after;
    while (!text.empty()) {
      if (!split_curly(text, &before, &inside, &after)) {
        const std::string cleaned = clean(text);
        if (dict_) {
          // As the original: words are the pieces between single spaces, looked up as they
          // are (a word with punctuation attached, "world.", is spelled out), each followed by
          // a space.
          for (const auto& word : split_on_space(cleaned)) {
            const std::string* pron = word.empty() ? nullptr : dict_->lookup(word);
            if (pron) {
              enc.arpabet(*pron);
            } else {
              enc.characters(word);
            }
            enc.ids.push_back(space);
          }
        } else {
          enc.characters(cleaned);
        }
        break;
      }
      enc.characters(clean(before));
      enc.arpabet(inside);
      text = after;
    }
    if (dict_ && !enc.ids.empty() && enc.ids.back() == space) enc.ids.pop_back();
  }

  if (!enc.dropped.empty()) {
    std::lock_guard<std::mutex> lock(unknown_->mutex);
    for (const auto& [s, n] : enc.dropped) unknown_->counts[s] += n;
  }
  if (options_.add_blank) return intersperse(enc.ids, blank_id());
  return std::move(enc.ids);
}

std::vector<std::string> TextProcessor::tokens(const std::string& utf8_text) const {
  std::vector<std::string> out;
  for (int64_t id : encode(utf8_text)) out.push_back(symbol(id));
  return out;
}

std::string TextProcessor::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id <= 0 || id >= static_cast<int64_t>(table_->size())) continue;  // pad, blank, invalid
    const std::string& s = table_->symbol(id);
    if (s.size() > 1 && s[0] == '@') {
      out += "{" + s.substr(1) + "}";
    } else {
      out += s;
    }
  }
  // Adjacent ARPAbet symbols share one pair of braces, as the original's replace('}{', ' ').
  std::string merged;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '}' && i + 1 < out.size() && out[i + 1] == '{') {
      merged += ' ';
      ++i;
    } else {
      merged += out[i];
    }
  }
  return merged;
}

std::string TextProcessor::describe() const {
  std::string cleaners;
  for (const auto& c : options_.cleaners) cleaners += (cleaners.empty() ? "" : ",") + c;
  std::string out = "text: " + options_.symbols + " symbols (" + std::to_string(num_symbols()) +
                    (options_.add_blank ? " + blank" : "") + "), cleaners [" + cleaners + "]";
  if (dict_) {
    out += ", cmudict " + dict_->path() + " (" + std::to_string(dict_->size()) + " words)";
  }
  if (phonemizer_) out += ", espeak-ng voice " + phonemizer_->voice();
  if (options_.add_space) out += ", add_space";
  return out;
}

size_t TextProcessor::num_symbols() const { return table_->size(); }

size_t TextProcessor::vocab_size() const { return table_->size() + (options_.add_blank ? 1 : 0); }

int64_t TextProcessor::blank_id() const {
  return options_.add_blank ? static_cast<int64_t>(table_->size()) : -1;
}

const std::string& TextProcessor::symbol(int64_t id) const {
  if (options_.add_blank && id == blank_id()) return kBlankName;
  if (id < 0 || id >= static_cast<int64_t>(table_->size())) {
    throw UserError("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                    std::to_string(vocab_size()) + ") of the " + options_.symbols +
                    " symbol set");
  }
  return table_->symbol(id);
}

bool TextProcessor::spoken(int64_t id) const {
  if (id == pad_id() || id == blank_id()) return false;
  for (const unsigned char c : symbol(id)) {
    if (std::isalnum(c) || c >= 0x80) return true;
  }
  return false;
}

int64_t TextProcessor::id_of(const std::string& symbol) const {
  if (options_.add_blank && symbol == kBlankName) return blank_id();
  return table_->id(symbol);
}

const std::vector<std::string>& TextProcessor::symbols() const { return table_->list(); }

std::map<std::string, int64_t> TextProcessor::unknown_counts() const {
  std::lock_guard<std::mutex> lock(unknown_->mutex);
  return unknown_->counts;
}

std::string TextProcessor::unknown_report() const {
  const auto counts = unknown_counts();
  if (counts.empty()) return "";
  int64_t total = 0;
  std::string list;
  for (const auto& [s, n] : counts) {
    total += n;
    list += (list.empty() ? "" : ", ") + describe_symbol(s) + " x" + std::to_string(n);
  }
  return "text: " + std::to_string(total) + " occurrence(s) of " + std::to_string(counts.size()) +
         " character(s) without a symbol in the " + options_.symbols +
         " set were dropped: " + list;
}

void TextProcessor::reset_unknown() {
  std::lock_guard<std::mutex> lock(unknown_->mutex);
  unknown_->counts.clear();
}

}  // namespace monoflow::text
