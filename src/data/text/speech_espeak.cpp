// libespeak-ng backend of speak(): synchronous synthesis; the callback collects the samples and
// the word, phoneme and clause-end events that word_timings() turns into word boundaries.
#include <espeak-ng/speak_lib.h>

#include <cstring>
#include <mutex>

#include "common/error.h"
#include "data/text/espeak_engine.h"
#include "data/text/speech.h"

namespace monoflow::text {
namespace {

struct Collected {
  std::vector<int16_t> samples;
  std::vector<SpeechEvent> events;
};

// The running synthesis's collector; set and used with espeak_mutex() held (the callback runs
// inside espeak_Synth, on the calling thread).
Collected* g_collecting = nullptr;

// espeak-ng calls this with each chunk of audio and the events that fall in it.
int collect(short* wav, int n, espeak_EVENT* events) {
  Collected* c = g_collecting;
  if (c == nullptr) return 1;  // not ours: stop
  for (espeak_EVENT* e = events; e != nullptr && e->type != espeakEVENT_LIST_TERMINATED; ++e) {
    SpeechEvent ev;
    ev.audio_ms = e->audio_position;
    if (e->type == espeakEVENT_WORD) {
      ev.kind = SpeechEvent::Kind::kWord;
      ev.text_position = e->text_position;
      ev.length = e->length;
    } else if (e->type == espeakEVENT_PHONEME) {
      ev.kind = SpeechEvent::Kind::kPhoneme;
      ev.phoneme.assign(e->id.string, strnlen(e->id.string, sizeof e->id.string));
    } else if (e->type == espeakEVENT_END) {
      ev.kind = SpeechEvent::Kind::kClauseEnd;
    } else {
      continue;
    }
    c->events.push_back(std::move(ev));
  }
  if (wav != nullptr && n > 0) c->samples.insert(c->samples.end(), wav, wav + n);
  return 0;  // go on
}

}  // namespace

Speech speak(const std::string& utf8_text, const SpeakOptions& o) {
  if (o.words_per_minute < 80 || o.words_per_minute > 450) {
    throw UserError("speaking rate " + std::to_string(o.words_per_minute) +
                    " words per minute: espeak-ng takes 80..450");
  }
  Collected c;
  Speech s;
  {
    std::lock_guard<std::mutex> lock(espeak_mutex());
    s.sample_rate = espeak_use_voice_locked(o.voice);
    espeak_SetParameter(espeakRATE, o.words_per_minute, 0);
    espeak_SetSynthCallback(collect);
    g_collecting = &c;
    // espeakENDPAUSE: the silence the espeak-ng command puts after a text, so that the samples
    // are the command's (-w) to the byte.
    const espeak_ERROR rc = espeak_Synth(utf8_text.c_str(), utf8_text.size() + 1, 0, POS_CHARACTER, 0,
                                         espeakCHARS_UTF8 | espeakENDPAUSE, nullptr, nullptr);
    espeak_Synchronize();
    g_collecting = nullptr;
    if (rc != EE_OK) throw UserError("espeak-ng failed to synthesize '" + utf8_text + "'");
  }
  s.samples = std::move(c.samples);
  s.words = word_timings(c.events, utf8_text, static_cast<double>(s.samples.size()) / s.sample_rate);
  return s;
}

}  // namespace monoflow::text
