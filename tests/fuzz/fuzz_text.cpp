// Fuzzes the text front-end (data/text/): cleaners (numbers, abbreviations, transliteration,
// Unicode lowercasing), curly-brace ARPAbet, CMUdict lookup and the tokenizer, on any bytes.
// Text is never refused by encode(), except with on_unknown_char: error (a UserError naming the
// character); ids must stay inside the vocabulary and decode again.
#include <stdexcept>

#include "data/text/cleaners.h"
#include "data/text/text_processor.h"
#include "data/text/utf8.h"
#include "fuzz_driver.h"

using namespace monoflow;

namespace {

std::vector<text::TextProcessor> make_processors() {
  std::vector<text::TextProcessor> out;
  text::TextOptions english;
  english.cmudict_path = std::string(MONOFLOW_SOURCE_DIR) + "/tests/data/fixtures/text/tiny_cmudict.dict";
  english.add_blank = true;
  out.emplace_back(english);
  text::TextOptions basic;
  basic.cleaners = {"basic_cleaners"};
  basic.add_space = true;
  out.emplace_back(basic);
  text::TextOptions translit;
  translit.cleaners = {"transliteration_cleaners", "english_cleaners"};
  out.emplace_back(translit);
  text::TextOptions strict;
  strict.on_unknown_char = "error";
  out.emplace_back(strict);
  return out;
}

void run(const std::string& input) {
  static const std::vector<text::TextProcessor> processors = make_processors();
  text::first_invalid_utf8(input);
  for (const auto& cleaner : text::known_cleaners()) text::run_cleaners(input, {cleaner});
  for (const auto& tp : processors) {
    const std::vector<int64_t> ids = tp.encode(input);
    for (int64_t id : ids) {
      if (id < 0 || id >= static_cast<int64_t>(tp.vocab_size())) {
        throw std::logic_error("id " + std::to_string(id) + " outside the vocabulary of " +
                               std::to_string(tp.vocab_size()));
      }
      tp.spoken(id);
    }
    tp.decode(ids);
    tp.tokens(input);
  }
}

}  // namespace

int main(int argc, char** argv) {
  fuzz::Target t;
  t.name = "fuzz_text";
  t.seeds = {"Printing, in the only sense with which we are at present concerned.",
             "Dr. Smith paid $5.50 for 3 apples on Jan. 1st, 1999; Mr. Jones paid \xC2\xA3" "12.",
             "{HH AH0 L OW1} world, {W ER1 L D}!"};
  t.valid_seeds = t.seeds.size();
  // Issue #13's and other edge inputs: a BOM, invalid UTF-8, only unknown characters, only
  // punctuation, only spaces, huge numbers, unbalanced braces, combining marks, emoji, NUL.
  t.seeds.insert(t.seeds.end(), {"\xEF\xBB\xBFHello.",
                                 "caf\xE9 \xC3\x28 \xF0\x28\x8C\x28 \xED\xA0\x80 \xF4\x90\x80\x80",
                                 "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "...!?", "   ",
                                 "$99999999999999999999999999.99 1000000000000000000000000th 12345678901234567890",
                                 "{HH AH0 {L OW1}} } { {}", "e\xCC\x81\xCC\x81 \xF0\x9F\x98\x80 \xC3\x9F \xC4\xB0",
                                 std::string("a\0b", 3)});
  t.dictionary = {"$", "\xC2\xA3", "%", ".", ",", "1", "0", "1st", "2nd", "3rd", "th", "-", "Mr.", "Dr.", "St.",
                  "{", "}", "{HH AH0}", "@", " ", "\t", "\n", "\xEF\xBB\xBF", "\xC3\x28", "\xFF", "\xE9",
                  "\xCC\x81", "\xF0\x9F\x98\x80", "\xE2\x80\x94", "1,000", "1.5", "9999999999999999999"};
  t.run = run;
  return fuzz::fuzz_main(argc, argv, t);
}
