#include "models/losses.h"

#include <cmath>

#include "models/mle_loss_cpu.h"

namespace monoflow::models {

namespace {
// Losses are reduced in float32 at least: under autocast their inputs may be bfloat16/half.
torch::Tensor upcast(const torch::Tensor& t) {
  return t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat) : t;
}
}  // namespace

torch::Tensor mle_loss(const torch::Tensor& z_in, const torch::Tensor& z_m_in, const torch::Tensor& z_logs_in,
                       const torch::Tensor& logdet_in, const torch::Tensor& z_mask_in) {
  auto z = upcast(z_in), z_m = upcast(z_m_in), z_logs = upcast(z_logs_in), logdet = upcast(logdet_in),
       z_mask = upcast(z_mask_in);
  if (cpu::mle_loss_cpu_applies(z, z_m, z_logs, logdet, z_mask)) return cpu::mle_loss_cpu(z, z_m, z_logs, logdet, z_mask);
  return mle_loss_reference(z, z_m, z_logs, logdet, z_mask);
}

torch::Tensor mle_loss_reference(const torch::Tensor& z, const torch::Tensor& z_m, const torch::Tensor& z_logs,
                                 const torch::Tensor& logdet, const torch::Tensor& z_mask) {
  auto l = torch::sum(z_logs) + 0.5 * torch::sum(torch::exp(-2 * z_logs) * (z - z_m).pow(2));
  l = l - torch::sum(logdet);
  l = l / torch::sum(torch::ones_like(z) * z_mask);
  return l + 0.5 * std::log(2 * M_PI);
}

torch::Tensor duration_loss(const torch::Tensor& logw, const torch::Tensor& logw_, const torch::Tensor& x_lengths) {
  return torch::sum((upcast(logw) - upcast(logw_)).pow(2)) / torch::sum(x_lengths.to(logw.device()));
}

}  // namespace monoflow::models
