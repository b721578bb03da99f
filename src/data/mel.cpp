#include "data/mel.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "data/serial_ops.h"

namespace monoflow::data {

namespace {
constexpr double kFSp = 200.0 / 3.0;          // Hz per mel in the linear part
constexpr double kMinLogHz = 1000.0;          // where the log part starts
constexpr double kMinLogMel = kMinLogHz / kFSp;
const double kLogStep = std::log(6.4) / 27.0;  // log step of the log part

// basis [n_mels, n_freqs] (float64) times magnitude [B, n_freqs, frames] (T, contiguous, CPU):
// each band sums its non-zero bins [lo, hi) in ascending order, in float64, on the calling
// thread. A BLAS matmul splits its sums by its thread count: with 4 or more intra-op threads
// the float32 mels differed in the last bits from those of 1 or 2 threads (mels cached by
// preprocess's serial workers against the trainer's main thread; FeatureCache tests on a
// 32-core host). This order is the same on every thread and machine.
template <typename T>
torch::Tensor apply_filterbank(const torch::Tensor& basis, const std::vector<std::pair<int64_t, int64_t>>& bands,
                               const torch::Tensor& magnitude) {
  const int64_t batch = magnitude.size(0), n_freqs = magnitude.size(1), frames = magnitude.size(2);
  const int64_t n_mels = basis.size(0);
  auto out = torch::empty({batch, n_mels, frames}, magnitude.options());
  const double* w = basis.data_ptr<double>();
  const T* in = magnitude.data_ptr<T>();
  T* o = out.data_ptr<T>();
  std::vector<double> acc(static_cast<size_t>(frames));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t m = 0; m < n_mels; ++m) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = bands[m].first; k < bands[m].second; ++k) {
        const double wk = w[m * n_freqs + k];
        const T* row = in + (b * n_freqs + k) * frames;
        for (int64_t t = 0; t < frames; ++t) acc[t] += wk * static_cast<double>(row[t]);
      }
      T* dst = o + (b * n_mels + m) * frames;
      for (int64_t t = 0; t < frames; ++t) dst[t] = static_cast<T>(acc[t]);
    }
  }
  return out;
}

}  // namespace

double hz_to_mel_slaney(double hz) {
  if (hz < kMinLogHz) return hz / kFSp;
  return kMinLogMel + std::log(hz / kMinLogHz) / kLogStep;
}

double mel_to_hz_slaney(double mel) {
  if (mel < kMinLogMel) return mel * kFSp;
  return kMinLogHz * std::exp(kLogStep * (mel - kMinLogMel));
}

torch::Tensor mel_filterbank(int sampling_rate, int n_fft, int n_mels, double fmin, double fmax,
                             torch::Dtype dtype) {
  const int n_freqs = n_fft / 2 + 1;
  std::vector<double> fft_hz(n_freqs);
  for (int k = 0; k < n_freqs; ++k) {
    fft_hz[k] = (sampling_rate / 2.0) * k / static_cast<double>(n_freqs - 1);
  }
  // n_mels + 2 points equally spaced on the mel scale, back in Hz: band i spans points i..i+2.
  const double mel_lo = hz_to_mel_slaney(fmin), mel_hi = hz_to_mel_slaney(fmax);
  std::vector<double> pts(n_mels + 2);
  for (int i = 0; i < n_mels + 2; ++i) {
    pts[i] = mel_to_hz_slaney(mel_lo + (mel_hi - mel_lo) * i / static_cast<double>(n_mels + 1));
  }
  auto fb = torch::zeros({n_mels, n_freqs}, torch::kFloat64);
  auto a = fb.accessor<double, 2>();
  for (int m = 0; m < n_mels; ++m) {
    const double left = pts[m], centre = pts[m + 1], right = pts[m + 2];
    const double norm = 2.0 / (right - left);  // Slaney: equal area per band
    for (int k = 0; k < n_freqs; ++k) {
      const double rise = (fft_hz[k] - left) / (centre - left);
      const double fall = (right - fft_hz[k]) / (right - centre);
      const double w = std::max(0.0, std::min(rise, fall));
      a[m][k] = w * norm;
    }
  }
  return fb.to(dtype);
}

MelSpectrogram::MelSpectrogram(const MelOptions& options) : options_(options) {
  // Kept in float64 and rounded to the computation's dtype per call (float32 in training).
  window_ = torch::hann_window(options.win_length, /*periodic=*/true,
                               torch::TensorOptions().dtype(torch::kFloat64));
  basis_ = mel_filterbank(options.sampling_rate, options.filter_length, options.n_mel_channels,
                          options.mel_fmin, options.mel_fmax, torch::kFloat64);
  const auto a = basis_.accessor<double, 2>();
  for (int64_t m = 0; m < basis_.size(0); ++m) {
    int64_t lo = basis_.size(1), hi = 0;
    for (int64_t k = 0; k < basis_.size(1); ++k) {
      if (a[m][k] != 0.0) {
        lo = std::min(lo, k);
        hi = k + 1;
      }
    }
    bands_.emplace_back(std::min(lo, hi), hi);
  }
}

torch::Tensor MelSpectrogram::operator()(const torch::Tensor& audio) const {
  TORCH_CHECK(audio.dim() == 1 || audio.dim() == 2, "MelSpectrogram: audio must be [T] or [B,T]");
  const auto device = audio.device();
  // On the CPU the mel must not depend on the calling thread's intra-op thread count (cached
  // mels are compared bit for bit): the element-wise ops run on this thread alone, and the
  // filterbank's sums in a fixed order (apply_filterbank).
  std::optional<SerialTorchOps> serial;
  if (!device.is_cuda()) serial.emplace();
  // float64 input stays float64 (reference checks); everything else is computed in float32.
  const auto dtype = audio.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto x = audio.to(dtype);
  // torch::stft centres the window: reflect padding by n_fft/2 on both sides, as the original.
  auto spec = torch::stft(x, options_.filter_length, options_.hop_length, options_.win_length,
                          window_.to(device, dtype), /*center=*/true, "reflect", /*normalized=*/false,
                          /*onesided=*/true, /*return_complex=*/true);
  auto magnitude = spec.abs();                       // [.., n_freqs, frames]
  torch::Tensor mel;  // [.., n_mels, frames]
  if (device.is_cuda() && dtype == torch::kFloat32) {
    // In float64 on the GPU: a float32 matmul there may run in TF32 (run.allow_tf32), which
    // would round the mel to ~1e-3; this keeps it independent of that global switch.
    mel = torch::matmul(basis_.to(device), magnitude.to(torch::kFloat64)).to(torch::kFloat32);
  } else if (device.is_cpu()) {
    const torch::Tensor m = (magnitude.dim() == 2 ? magnitude.unsqueeze(0) : magnitude).contiguous();
    mel = dtype == torch::kFloat64 ? apply_filterbank<double>(basis_, bands_, m)
                                   : apply_filterbank<float>(basis_, bands_, m);
    if (magnitude.dim() == 2) mel = mel.squeeze(0);
  } else {
    mel = torch::matmul(basis_.to(device, dtype), magnitude);
  }
  return torch::log(torch::clamp_min(mel, 1e-5));
}

torch::Tensor MelSpectrogram::waveform(const torch::Tensor& samples,
                                       std::optional<at::Generator> generator) const {
  auto x = samples.to(torch::kFloat32) * 32768.0;  // the int16 scale the original reads
  if (options_.add_noise) {
    x = x + torch::rand(x.sizes(), generator, x.options());
  }
  return x / options_.max_wav_value;
}

at::Generator make_cpu_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

}  // namespace monoflow::data
