// Options of the text front-end: the record the run configuration holds for the text keys of
// its data section (train::Config::text), so each is declared once, here, with its default.
// YAML keys: data.text_cleaners -> cleaners; the others have the key's name.
#pragma once

#include <string>
#include <vector>

namespace monoflow::text {

struct TextOptions {
  // Cleaner names applied in order: english_cleaners | basic_cleaners | transliteration_cleaners.
  std::vector<std::string> cleaners{"english_cleaners"};
  // "english": the original 148 symbols (pad, punctuation, letters, @ARPAbet).
  // "ipa": espeak-ng IPA phonemes (needs libespeak-ng compiled in; UserError otherwise).
  std::string symbols = "english";
  std::string cmudict_path;       // empty: no dictionary (english set only)
  bool add_space = false;         // text = " " + strip(text) + " " before encoding (original)
  bool add_blank = false;         // intersperse blank_id() between all tokens and at both ends
  std::string espeak_voice = "en-us";  // ipa only: a voice ("en-us") or a language ("en-gb")
  // Characters without a symbol: "skip" drops them (as the original) and counts them; "error"
  // throws UserError naming the character instead.
  std::string on_unknown_char = "skip";

  // Throws OptionError naming the data.* key: an unknown cleaner or symbol set, a CMUdict with
  // the ipa set, an unknown on_unknown_char.
  void validate() const;
  // Canonical text of every field: two front-ends with the same key encode text alike.
  std::string settings_key() const;
};

}  // namespace monoflow::text
