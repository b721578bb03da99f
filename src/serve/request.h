// A synthesis request's parameters, checked before it is queued: the text (not empty, at most
// max_chars characters) and the speaker (speaker_id; an integer in range for a multi-speaker
// model, ignored by a single-speaker one as Coqui's tts-server ignores it).
#pragma once

#include <cstdint>
#include <string>

namespace monoflow::serve {

struct RequestLimits {
  int64_t max_chars = 1000;
  int n_speakers = 0;            // the model's data.n_speakers
  int64_t default_speaker = -1;  // serve --speaker: a multi-speaker request's speaker when it names none
};

struct CheckedRequest {
  int status = 200;   // 400 or 413 with `error` when refused
  std::string error;
  std::string text;
  int64_t speaker = -1;
};

// `text` and `speaker_id` as the request gave them ("" when absent); the messages name the
// parameters as `names` gives them (MaryTTS's /process: INPUT_TEXT, VOICE).
struct ParameterNames {
  std::string text = "text", speaker = "speaker_id";
};
CheckedRequest check_request(const std::string& text, const std::string& speaker_id, const RequestLimits& limits,
                             const ParameterNames& names = {});

}  // namespace monoflow::serve
