// Griffin-Lim phase reconstruction (the "fast" variant with momentum, Perraudin et al. 2013)
// to hear a mel spectrogram without a neural vocoder: validation audio in TensorBoard.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "common/arg.h"
#include "data/options.h"

namespace monoflow::train {

struct GriffinLimOptions {
  GriffinLimOptions() = default;
  // The STFT of the training recipe's mels (n_fft, hop and window).
  explicit GriffinLimOptions(const data::MelOptions& mel)
      : n_fft_(mel.filter_length), hop_length_(mel.hop_length), win_length_(mel.win_length) {}

  MONOFLOW_ARG(int, n_fft) = 1024;
  MONOFLOW_ARG(int, hop_length) = 256;
  MONOFLOW_ARG(int, win_length) = 1024;
  MONOFLOW_ARG(int, iterations) = 32;
  MONOFLOW_ARG(double, momentum) = 0.99;
  // The initial phases come from a private generator: the training RNG is untouched.
  MONOFLOW_ARG(uint64_t, seed) = 0;
};

// magnitude: [n_fft/2+1, frames] linear magnitude spectrogram -> 1-D waveform (CPU float32).
torch::Tensor griffin_lim(const torch::Tensor& magnitude, const GriffinLimOptions& options);

// log_mel: [n_mels, frames] natural-log mel magnitudes (log(clamp(mel, 1e-5)) as the original
// features); mel_basis: [n_mels, n_fft/2+1]. Least-squares inverse of the filterbank, clamped
// at 0 -> [n_fft/2+1, frames].
torch::Tensor mel_to_magnitude(const torch::Tensor& log_mel, const torch::Tensor& mel_basis);

}  // namespace monoflow::train
