#include "train/log/tensorboard.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "common/error.h"
#include "train/log/event_proto.h"
#include "train/log/tfrecord.h"

namespace monoflow::train {
namespace {

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

EventWriter::EventWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto now = static_cast<long long>(wall_time());
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(now) + "." +
                                         host_name() + "." + std::to_string(getpid())))
              .string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) {
    throw FileError(path_, 0, "cannot create the TensorBoard event file; check that the run "
                              "directory is writable or set run.tensorboard: false");
  }
  append(proto::file_version_event(wall_time(), "brain.Event:2"));
  flush();
}

EventWriter::~EventWriter() {
  if (out_.is_open()) out_.flush();
}

void EventWriter::append(const std::string& event) {
  const std::string record = tfrecord_frame(event);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
}

void EventWriter::purge_from(int64_t step) { append(proto::session_start_event(wall_time(), step)); }

void EventWriter::scalar(const std::string& tag, double value, int64_t step) {
  append(proto::scalar_event(wall_time(), step, tag, static_cast<float>(value)));
}

void EventWriter::image(const std::string& tag, const std::string& png, int height, int width,
                        int channels, int64_t step) {
  append(proto::image_event(wall_time(), step, tag, png, height, width, channels));
}

void EventWriter::audio(const std::string& tag, const std::string& wav, int sample_rate,
                        int64_t frames, int64_t step) {
  append(proto::audio_event(wall_time(), step, tag, wav, static_cast<float>(sample_rate), 1,
                            frames));
}

void EventWriter::flush() { out_.flush(); }

}  // namespace monoflow::train
