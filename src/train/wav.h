// In-memory 16-bit PCM mono WAV encoding (for TensorBoard audio and synthesized files): the
// samples are quantised here (round(x * 32767), clipped to [-1, 1]), libsndfile writes the file.
#pragma once

#include <torch/torch.h>

#include <string>

namespace monoflow::train {

// samples: 1-D float in [-1, 1] (clipped), any device.
std::string encode_wav16(const torch::Tensor& samples, int sample_rate);

}  // namespace monoflow::train
