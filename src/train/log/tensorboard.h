// A TensorBoard event-file writer: scalars, PNG images and WAV audio, appended as TFRecords
// to <dir>/events.out.tfevents.<unix time>.<host>.<pid>.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace monoflow::train {

class EventWriter {
 public:
  explicit EventWriter(const std::string& dir);  // FileError when the file cannot be created
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void scalar(const std::string& tag, double value, int64_t step);
  // A resumed run: TensorBoard forgets what earlier files logged from `step` on (the steps a
  // killed run logged past its last checkpoint, which the resumed run logs again).
  void purge_from(int64_t step);
  void image(const std::string& tag, const std::string& png, int height, int width,
             int channels, int64_t step);
  void audio(const std::string& tag, const std::string& wav, int sample_rate, int64_t frames,
             int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& event);
  std::string path_;
  std::ofstream out_;
};

}  // namespace monoflow::train
