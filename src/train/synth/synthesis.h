// Text -> mel -> Griffin-Lim waveform from a checkpoint, for tools/synthesize and the
// quick-start. The model is built from the checkpoint's config snapshot.
#pragma once

#include <torch/torch.h>

#include <string>

namespace monoflow::train {

struct SynthesisOptions {
  std::string checkpoint;
  std::string text;
  std::string device = "auto";
  double noise_scale = 0.667;
  double length_scale = 1.0;
  int griffin_lim_iterations = 32;
  int64_t seed = 1234;
};

struct SynthesisResult {
  torch::Tensor mel;        // [n_mels, frames] (CPU)
  torch::Tensor alignment;  // [tokens, frames] (CPU)
  torch::Tensor audio;      // 1-D, peak-normalised to 0.9 (CPU)
  int sample_rate = 22050;
  int64_t step = 0;         // the checkpoint's step
};

SynthesisResult synthesize(const SynthesisOptions& options);

}  // namespace monoflow::train
