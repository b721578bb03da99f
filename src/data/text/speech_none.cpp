// Built when libespeak-ng was not found: no speech rendering.
#include "common/error.h"
#include "data/text/speech.h"

namespace monoflow::text {

Speech speak(const std::string&, const SpeakOptions&) {
  throw UserError(
      "speech rendering needs libespeak-ng, but this monoflow was built without it. Install "
      "libespeak-ng-dev and rebuild (cmake -DMONOFLOW_WITH_ESPEAK=ON).");
}

}  // namespace monoflow::text
