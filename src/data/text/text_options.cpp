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

}  // namespace monoflow::text
