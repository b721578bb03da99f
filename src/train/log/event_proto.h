// Hand-written protobuf encoding of the few TensorBoard messages we emit
// (tensorflow/core/util/event.proto and framework/summary.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//             SessionLog session_log = 7; }
//   SessionLog { SessionStatus status = 1; }  (START = 1)
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; Image image = 4; Audio audio = 6; }
//   Image   { int32 height = 1; int32 width = 2; int32 colorspace = 3; bytes encoded_image_string = 4; }
//   Audio   { float sample_rate = 1; int64 num_channels = 2; int64 length_frames = 3;
//             bytes encoded_audio_string = 4; string content_type = 5; }
#pragma once

#include <cstdint>
#include <string>

namespace monoflow::train::proto {

std::string file_version_event(double wall_time, const std::string& version);
// SessionLog START at `step`: TensorBoard drops what earlier event files logged at steps >= step
// (what PyTorch's SummaryWriter(purge_step=...) writes).
std::string session_start_event(double wall_time, int64_t step);
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// png: an encoded PNG; channels: 1 (grey), 3 (RGB) or 4 (RGBA), the colorspace field.
std::string image_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& png, int height, int width, int channels);
// wav: an encoded RIFF/WAVE file.
std::string audio_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& wav, float sample_rate, int64_t channels,
                        int64_t frames);

}  // namespace monoflow::train::proto
