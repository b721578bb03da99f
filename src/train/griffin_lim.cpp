#include "train/griffin_lim.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace monoflow::train {

torch::Tensor griffin_lim(const torch::Tensor& magnitude, const GriffinLimOptions& o) {
  TORCH_CHECK(magnitude.dim() == 2 && magnitude.size(0) == o.n_fft() / 2 + 1,
              "griffin_lim: magnitude must be [n_fft/2+1, frames], got ", magnitude.sizes());
  torch::NoGradGuard no_grad;
  const torch::Tensor mag = magnitude.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t frames = mag.size(1);
  const int64_t length = (frames - 1) * o.hop_length();
  const torch::Tensor window = torch::hann_window(o.win_length());
  auto generator = at::make_generator<at::CPUGeneratorImpl>(o.seed());
  torch::Tensor phase = torch::rand(mag.sizes(), generator, torch::kFloat32) * (2 * M_PI);
  torch::Tensor angles = torch::polar(torch::ones_like(mag), phase);

  auto inverse = [&](const torch::Tensor& spec) {
    return torch::istft(spec, o.n_fft(), o.hop_length(), o.win_length(), window, /*center=*/true,
                        /*normalized=*/false, /*onesided=*/true, length);
  };
  auto forward = [&](const torch::Tensor& wave) {
    return torch::stft(wave, o.n_fft(), o.hop_length(), o.win_length(), window, /*center=*/true,
                       "reflect", /*normalized=*/false, /*onesided=*/true,
                       /*return_complex=*/true);
  };

  torch::Tensor previous = torch::zeros_like(angles);
  for (int i = 0; i < o.iterations(); ++i) {
    const torch::Tensor rebuilt = forward(inverse(mag * angles));
    angles = rebuilt - previous * (o.momentum() / (1.0 + o.momentum()));
    angles = angles / (angles.abs() + 1e-16);
    previous = rebuilt;
  }
  return inverse(mag * angles);
}

torch::Tensor mel_to_magnitude(const torch::Tensor& log_mel, const torch::Tensor& mel_basis) {
  TORCH_CHECK(log_mel.dim() == 2 && mel_basis.dim() == 2 && log_mel.size(0) == mel_basis.size(0),
              "mel_to_magnitude: log_mel [n_mels, frames] and mel_basis [n_mels, bins] needed, got ",
              log_mel.sizes(), " and ", mel_basis.sizes());
  torch::NoGradGuard no_grad;
  const torch::Tensor mel = log_mel.detach().to(torch::kCPU, torch::kFloat32).exp();
  const torch::Tensor basis = mel_basis.to(torch::kCPU, torch::kFloat32);
  return torch::matmul(torch::linalg_pinv(basis), mel).clamp_min(0.0);
}

}  // namespace monoflow::train
