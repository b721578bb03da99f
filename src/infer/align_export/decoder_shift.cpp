#include "infer/align_export/decoder_shift.h"

#include <vector>

namespace monoflow::train {

void DecoderShift::add(models::GlowTTS& model, const torch::Tensor& mel, const torch::Tensor& mel_lengths,
                       const torch::Tensor& g) {
  torch::AutoGradMode grad(true);
  const int64_t n_sqz = model->options().n_sqz();
  const int64_t frames = mel.size(2) / n_sqz * n_sqz;
  const torch::Tensor lengths = (torch::div(mel_lengths, n_sqz, "floor") * n_sqz).to(torch::kCPU, torch::kInt64);
  const torch::Tensor y = mel.slice(2, 0, frames).to(torch::kFloat32).detach().requires_grad_(true);
  const torch::Tensor positions = torch::arange(frames, y.options().requires_grad(false));
  const torch::Tensor mask = (positions.unsqueeze(0) < lengths.to(y.device()).unsqueeze(1)).unsqueeze(1).to(y.dtype());
  const torch::Tensor z = model->decoder->forward(y, mask, g, /*reverse=*/false).first;
  const int64_t batch = y.size(0), channels = z.size(1);
  // A fixed projection of z's channels, so that results do not depend on the global RNG.
  const torch::Tensor direction =
      torch::cos(torch::arange(channels, y.options().requires_grad(false)) * 2.399963).unsqueeze(0);
  const torch::Tensor rows = torch::arange(batch, torch::TensorOptions().dtype(torch::kInt64).device(y.device()));
  const auto length_at = lengths.accessor<int64_t, 1>();
  for (const double fraction : {0.25, 0.5, 0.75}) {
    for (const int64_t parity : {0, 1}) {
      std::vector<int64_t> at(static_cast<size_t>(batch));
      for (int64_t b = 0; b < batch; ++b) {
        at[static_cast<size_t>(b)] = std::min(static_cast<int64_t>(fraction * length_at[b]) / 2 * 2 + parity,
                                              std::max<int64_t>(length_at[b] - 1, 0));
      }
      const torch::Tensor t = torch::tensor(at, torch::kInt64).to(y.device());
      const torch::Tensor picked = z.index({rows, torch::indexing::Slice(), t});  // [B, C]
      const torch::Tensor gy = torch::autograd::grad({(picked * direction).sum()}, {y}, {}, /*retain_graph=*/true)[0];
      const torch::Tensor energy = gy.to(torch::kFloat64).pow(2).sum(1) * mask.squeeze(1).to(torch::kFloat64);  // [B, S]
      const torch::Tensor total = energy.sum(1);
      const torch::Tensor centre = (energy * positions.to(torch::kFloat64)).sum(1) / total.clamp_min(1e-300);
      const torch::Tensor shift = (centre - t.to(torch::kFloat64)).to(torch::kCPU);
      const torch::Tensor valid = (total > 0).to(torch::kCPU);
      for (int64_t b = 0; b < batch; ++b) {
        if (length_at[b] < 2 || !valid[b].item<bool>()) continue;
        sum_ += shift[b].item<double>();
        ++probes_;
      }
    }
  }
}

}  // namespace monoflow::train
