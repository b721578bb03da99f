// The one libespeak-ng engine of the process, shared by the phonemizer and the speech renderer
// (espeak-ng keeps global state and is not thread-safe). Internal to monoflow_text; built only
// with libespeak-ng.
#pragma once

#include <mutex>
#include <string>

namespace monoflow::text {

// Held around every espeak-ng call.
std::mutex& espeak_mutex();

// Initialises espeak-ng on first use (synchronous output, phoneme events on) and selects
// `voice`: a voice name or file ("en-us", "gmw/en"), else a language ("en-gb"). Returns the
// engine's sample rate. UserError when espeak-ng cannot start or has no such voice. Call with
// espeak_mutex() held.
int espeak_use_voice_locked(const std::string& voice);

}  // namespace monoflow::text
