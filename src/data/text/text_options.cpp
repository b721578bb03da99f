#include "data/text/text_options.h"

#include "common/checks.h"
#include "data/text/cleaners.h"

namespace monoflow::text {

void TextOptions::validate() const {
  check_cleaner_names(cleaners);
  check::require(symbols == "english" || symbols == "ipa", "data.symbols",
                 "unknown symbol set '" + symbols + "'; known: english, ipa");
  check::require(symbols != "ipa" || cmudict_path.empty(), "data.cmudict_path",
                 "applies to data.symbols: english only (ipa phonemes come from espeak-ng); remove "
                 "one of the two");
  check::require("data.on_unknown_char", check::one_of(on_unknown_char, {"skip", "error"}));
}

std::string TextOptions::settings_key() const {
  std::string cleaner_list;
  for (const std::string& name : cleaners) cleaner_list += (cleaner_list.empty() ? "" : ",") + name;
  return "cleaners=" + cleaner_list + ";symbols=" + symbols + ";cmudict=" + cmudict_path +
         ";add_space=" + std::to_string(add_space) + ";add_blank=" + std::to_string(add_blank) +
         ";espeak_voice=" + espeak_voice + ";on_unknown_char=" + on_unknown_char;
}

}  // namespace monoflow::text
