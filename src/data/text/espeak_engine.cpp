#include "data/text/espeak_engine.h"

#include <espeak-ng/speak_lib.h>

#include "common/error.h"

namespace monoflow::text {
namespace {

// Guarded by espeak_mutex().
int g_sample_rate = 0;  // 0: not initialised
std::string g_voice;

}  // namespace

std::mutex& espeak_mutex() {
  static std::mutex m;
  return m;
}

int espeak_use_voice_locked(const std::string& voice) {
  if (g_sample_rate == 0) {
    // Phoneme events cost nothing to the phonemizer and let the renderer find pauses.
    const int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, nullptr,
                                       espeakINITIALIZE_DONT_EXIT | espeakINITIALIZE_PHONEME_EVENTS);
    if (rate <= 0) {
      throw UserError("espeak-ng could not be initialised (is espeak-ng-data installed?)");
    }
    g_sample_rate = rate;
  }
  if (g_voice != voice) {
    espeak_VOICE by_language{};
    by_language.languages = voice.c_str();
    if (espeak_SetVoiceByName(voice.c_str()) != EE_OK &&
        espeak_SetVoiceByProperties(&by_language) != EE_OK) {
      g_voice.clear();
      throw UserError("espeak-ng has no voice '" + voice +
                      "' (neither a voice nor a language); list them with: espeak-ng --voices");
    }
    g_voice = voice;
  }
  return g_sample_rate;
}

}  // namespace monoflow::text
