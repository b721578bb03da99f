// Built when libespeak-ng was not found: the IPA symbol set is unavailable.
#include "common/error.h"
#include "data/text/phonemizer.h"

namespace monoflow::text {

bool espeak_compiled_in() { return false; }

Phonemizer::Phonemizer(std::string voice) : voice_(std::move(voice)) {
  throw UserError(
      "data.symbols: ipa needs espeak-ng phonemes, but this monoflow was built without "
      "libespeak-ng. Install libespeak-ng-dev and rebuild (cmake -DMONOFLOW_WITH_ESPEAK=ON), "
      "or use data.symbols: english.");
}

std::string Phonemizer::phonemize(const std::string&) const {
  throw UserError("espeak-ng phonemizer unavailable: built without libespeak-ng");
}

}  // namespace monoflow::text
