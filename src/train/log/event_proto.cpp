#include "train/log/event_proto.h"

#include <cstring>

namespace monoflow::train::proto {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void key(std::string& out, uint32_t field, WireType type) { varint(out, (field << 3) | type); }

void field_varint(std::string& out, uint32_t field, int64_t v) {
  key(out, field, kVarint);
  varint(out, static_cast<uint64_t>(v));
}

void field_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  key(out, field, kBytes);
  varint(out, bytes.size());
  out += bytes;
}

void field_double(std::string& out, uint32_t field, double v) {
  key(out, field, kFixed64);
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void field_float(std::string& out, uint32_t field, float v) {
  key(out, field, kFixed32);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

std::string event_with_value(double wall_time, int64_t step, const std::string& value) {
  std::string summary;
  field_bytes(summary, 1, value);
  std::string event;
  field_double(event, 1, wall_time);
  field_varint(event, 2, step);
  field_bytes(event, 5, summary);
  return event;
}

}  // namespace

std::string file_version_event(double wall_time, const std::string& version) {
  std::string event;
  field_double(event, 1, wall_time);
  field_bytes(event, 3, version);
  return event;
}

std::string session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  field_varint(session_log, 1, 1);  // status: START
  std::string event;
  field_double(event, 1, wall_time);
  field_varint(event, 2, step);
  field_bytes(event, 7, session_log);
  return event;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;
  field_bytes(v, 1, tag);
  field_float(v, 2, value);
  return event_with_value(wall_time, step, v);
}

std::string image_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& png, int height, int width, int channels) {
  std::string image;
  field_varint(image, 1, height);
  field_varint(image, 2, width);
  field_varint(image, 3, channels);
  field_bytes(image, 4, png);
  std::string v;
  field_bytes(v, 1, tag);
  field_bytes(v, 4, image);
  return event_with_value(wall_time, step, v);
}

std::string audio_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& wav, float sample_rate, int64_t channels,
                        int64_t frames) {
  std::string audio;
  field_float(audio, 1, sample_rate);
  field_varint(audio, 2, channels);
  field_varint(audio, 3, frames);
  field_bytes(audio, 4, wav);
  field_bytes(audio, 5, "audio/wav");
  std::string v;
  field_bytes(v, 1, tag);
  field_bytes(v, 6, audio);
  return event_with_value(wall_time, step, v);
}

}  // namespace monoflow::train::proto
