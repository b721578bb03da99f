// The mel spectrogram of the original Glow-TTS (TacotronSTFT): magnitude STFT with a periodic
// Hann window and reflect padding of n_fft/2 on both sides, a Slaney-style mel filterbank
// (librosa.filters.mel defaults: Slaney mel scale, Slaney area normalisation), natural log of
// max(x, 1e-5). Pure torch ops: runs on the device of its input.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "data/options.h"

namespace monoflow::data {

// Slaney mel scale (librosa, htk=False): linear below 1 kHz, logarithmic above.
double hz_to_mel_slaney(double hz);
double mel_to_hz_slaney(double mel);

// [n_mels, n_fft/2 + 1] on the CPU, computed in double precision as librosa does, returned
// as `dtype` (float32 like librosa by default).
torch::Tensor mel_filterbank(int sampling_rate, int n_fft, int n_mels, double fmin, double fmax,
                             torch::Dtype dtype = torch::kFloat32);

class MelSpectrogram {
 public:
  explicit MelSpectrogram(const MelOptions& options);

  // audio: [T] or [B, T] in the model's [-1, 1] scale (see waveform()). Returns
  // [n_mels, frames] or [B, n_mels, frames] on audio's device, frames = 1 + T / hop; float32,
  // or float64 for float64 input (used to check the recipe against a float64 reference). On
  // the CPU the result is the same bits whatever thread calls it and however many intra-op
  // threads it has (the filterbank's sums run in a fixed order, in float64).
  torch::Tensor operator()(const torch::Tensor& audio) const;

  // Frames a signal of `samples` samples gives (centred frames).
  int64_t num_frames(int64_t samples) const { return 1 + samples / options_.hop_length; }

  // The model-scale waveform from libsndfile-scale samples (int16 value / 32768), as the original
  // computes it: (int16 value [+ U[0,1) when add_noise]) / max_wav_value. `generator` seeds the
  // dither (CPU tensors); without one the global generator is used.
  torch::Tensor waveform(const torch::Tensor& samples,
                         std::optional<at::Generator> generator = std::nullopt) const;

  torch::Tensor filterbank() const { return basis_.to(torch::kFloat32); }
  const MelOptions& options() const { return options_; }

 private:
  MelOptions options_;
  torch::Tensor window_;  // [win_length] periodic Hann, float64, CPU
  torch::Tensor basis_;   // [n_mels, n_freqs] float64, CPU
  std::vector<std::pair<int64_t, int64_t>> bands_;  // each band's non-zero bins [lo, hi)
};

// A CPU generator for dither with a fixed seed (deterministic batches for exact resume).
at::Generator make_cpu_generator(uint64_t seed);

}  // namespace monoflow::data
