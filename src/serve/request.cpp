#include "serve/request.h"

#include <cstdlib>

namespace monoflow::serve {
namespace {

CheckedRequest refuse(int status, std::string error) {
  CheckedRequest r;
  r.status = status;
  r.error = std::move(error);
  return r;
}

// Code points of UTF-8 text: what a user counts as characters (bytes would punish accents).
int64_t characters(const std::string& s) {
  int64_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

CheckedRequest check_request(const std::string& text, const std::string& speaker_id, const RequestLimits& limits,
                             const ParameterNames& names) {
  const std::string& t = names.text;
  const std::string& v = names.speaker;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return refuse(400, t + ": empty; give the text to say, e.g. /api/tts?text=Hello%20there.");
  }
  if (const int64_t n = characters(text); n > limits.max_chars) {
    return refuse(413, t + ": " + std::to_string(n) + " characters, more than --max-chars " +
                           std::to_string(limits.max_chars) + "; split the text or start serve with a larger --max-chars");
  }
  CheckedRequest r;
  r.text = text;
  if (limits.n_speakers <= 1) return r;  // speaker_id is ignored, as Coqui's tts-server ignores it
  const std::string range = "0.." + std::to_string(limits.n_speakers - 1);
  if (speaker_id.empty()) {
    if (limits.default_speaker < 0) {
      return refuse(400, v + ": this model has " + std::to_string(limits.n_speakers) + " speakers; give " + v + "=" +
                             range + " (or start serve with --speaker)");
    }
    r.speaker = limits.default_speaker;
    return r;
  }
  char* end = nullptr;
  const long long id = std::strtoll(speaker_id.c_str(), &end, 10);
  if (end == speaker_id.c_str() || *end != '\0' || speaker_id[0] == ' ' || speaker_id[0] == '+') {
    return refuse(400, v + " '" + speaker_id + "': not a speaker number; give " + range);
  }
  if (id < 0 || id >= limits.n_speakers) {
    return refuse(400, v + " " + speaker_id + ": out of range; this model has " +
                           std::to_string(limits.n_speakers) + " speakers: " + range);
  }
  r.speaker = id;
  return r;
}

}  // namespace monoflow::serve
