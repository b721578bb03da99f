// Griffin-Lim phase reconstruction (the "fast" variant with momentum, Perraudin et al. 2013)
// to hear a mel spectrogram without a neural vocoder: validation audio in TensorBoard.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace monoflow::train {

struct GriffinLimOptions {
  int n_fft = 1024;
  int hop_length = 256;
  int win_length = 1024;
  int iterations = 32;
  double momentum = 0.99;
  uint64_t seed = 0;  // initial phases come from a private generator: training RNG is untouched
};

// magnitude: [n_fft/2+1, frames] linear magnitude spectrogram -> 1-D waveform (CPU float32).
torch::Tensor griffin_lim(const torch::Tensor& magnitude, const GriffinLimOptions& options);

// log_mel: [n_mels, frames] natural-log mel magnitudes (log(clamp(mel, 1e-5)) as the original
// features); mel_basis: [n_mels, n_fft/2+1]. Least-squares inverse of the filterbank, clamped
// at 0 -> [n_fft/2+1, frames].
torch::Tensor mel_to_magnitude(const torch::Tensor& log_mel, const torch::Tensor& mel_basis);

}  // namespace monoflow::train
