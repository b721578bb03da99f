#include <gtest/gtest.h>

#include "train/griffin_lim.h"

namespace monoflow::train {
namespace {

torch::Tensor magnitude_of(const torch::Tensor& wave, const GriffinLimOptions& o) {
  return torch::stft(wave, o.n_fft(), o.hop_length(), o.win_length(), torch::hann_window(o.win_length()),
                     true, "reflect", false, true, true)
      .abs();
}

// A window of n_fft samples, hop n_fft / 4.
GriffinLimOptions small_options(int n_fft, int iterations) {
  return GriffinLimOptions().n_fft(n_fft).win_length(n_fft).hop_length(n_fft / 4).iterations(iterations);
}

TEST(GriffinLim, RebuildsASpectrogramsMagnitude) {
  const GriffinLimOptions o = small_options(256, 32);
  const double rate = 8000;
  const torch::Tensor t = torch::arange(4000, torch::kFloat64) / rate;
  const torch::Tensor wave = (0.5 * torch::sin(2 * M_PI * 440 * t) + 0.25 * torch::sin(2 * M_PI * 1250 * t)).to(torch::kFloat32);
  const torch::Tensor target = magnitude_of(wave, o);
  const GriffinLimOptions no_iterations = GriffinLimOptions(o).iterations(0);
  const torch::Tensor random_phase = griffin_lim(target, no_iterations);
  const torch::Tensor rebuilt = griffin_lim(target, o);
  EXPECT_EQ(rebuilt.dim(), 1);
  EXPECT_EQ(rebuilt.size(0), (target.size(1) - 1) * o.hop_length());
  const torch::Tensor again = magnitude_of(rebuilt, o);
  // Spectral convergence: relative Frobenius error of the magnitudes. The random initial phases
  // give a large error; 32 fast Griffin-Lim iterations must cut it at least fourfold, below 0.2.
  const auto convergence = [&](const torch::Tensor& w) {
    return ((magnitude_of(w, o) - target).norm() / target.norm()).item<double>();
  };
  const double before = convergence(random_phase), after = convergence(rebuilt);
  EXPECT_LT(after, 0.2);
  EXPECT_LT(after, before / 4) << "before " << before;
  // Strongest bin of the middle frame: 440 Hz -> bin 440 / (8000 / 256) = 14.08.
  EXPECT_EQ(again.index({torch::indexing::Slice(), again.size(1) / 2}).argmax().item<int64_t>(), 14);
}

TEST(GriffinLim, SameSeedSameAudioAndGlobalRngUntouched) {
  const GriffinLimOptions o = small_options(64, 4);
  const torch::Tensor mag = torch::rand({33, 20}) + 0.1;
  torch::manual_seed(7);
  const torch::Tensor expected_next = torch::rand({3});
  torch::manual_seed(7);
  const torch::Tensor a = griffin_lim(mag, o);
  const torch::Tensor b = griffin_lim(mag, o);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::equal(torch::rand({3}), expected_next));
}

TEST(GriffinLim, MelInverseRecoversAFullRankFilterbank) {
  torch::manual_seed(3);
  const torch::Tensor basis = torch::rand({12, 9}) + 0.05;  // more bands than bins: invertible
  const torch::Tensor mag = torch::rand({9, 5}) + 0.1;
  const torch::Tensor log_mel = torch::log(torch::matmul(basis, mag).clamp_min(1e-5));
  EXPECT_TRUE(torch::allclose(mel_to_magnitude(log_mel, basis), mag, 1e-4, 1e-4));
}

}  // namespace
}  // namespace monoflow::train
