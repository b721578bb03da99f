#include "models/flow_fused.h"

#include "models/flow_reverse_cpu.h"
#include "models/flow_train_cpu.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/flow_fused_cuda.h"
#endif

namespace monoflow::models {

torch::Tensor actnorm_affine_reference(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                                       const torch::Tensor& x_mask) {
  return (bias + torch::exp(logs) * x) * x_mask;
}

torch::Tensor actnorm_affine(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                             const torch::Tensor& x_mask) {
#ifdef MONOFLOW_HAS_CUDA
  if (cuda::fused_actnorm_applies(x, logs, bias, x_mask)) return cuda::actnorm_affine(x, logs, bias, x_mask);
#endif
  if (cpu::actnorm_train_applies(x, logs, bias, x_mask)) return cpu::actnorm_affine_train(x, logs, bias, x_mask);
  return actnorm_affine_reference(x, logs, bias, x_mask);
}

torch::Tensor actnorm_reverse_reference(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                                        const torch::Tensor& x_mask) {
  return (x - bias) * torch::exp(-logs) * x_mask;
}

torch::Tensor actnorm_reverse(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                              const torch::Tensor& x_mask) {
  if (cpu::flow_reverse_applies(x, x_mask)) return cpu::actnorm_reverse(x, logs, bias, x_mask);
  return actnorm_reverse_reference(x, logs, bias, x_mask);
}

torch::Tensor invconv_mix_reference(const torch::Tensor& x_in, const torch::Tensor& w, const torch::Tensor& x_mask) {
  const int64_t b = x_in.size(0), c = x_in.size(1), t = x_in.size(2), s = w.size(0);
  auto x = x_in.reshape({b, 2, c / s, s / 2, t}).permute({0, 1, 3, 2, 4}).reshape({b, s, c / s, t});
  // CPU inference: the mixing as a matrix product by the n x n weight rather than a
  // convolution call with its per-call setup (the same sums).
  auto z = (x.device().is_cpu() && !torch::GradMode::is_enabled())
               ? torch::matmul(w, x.reshape({b, s, (c / s) * t})).view({b, s, c / s, t})
               : torch::conv2d(x, w.view({s, s, 1, 1}));
  return z.reshape({b, 2, s / 2, c / s, t}).permute({0, 1, 3, 2, 4}).reshape({b, c, t}) * x_mask;
}

torch::Tensor invconv_mix(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask) {
#ifdef MONOFLOW_HAS_CUDA
  if (cuda::fused_invconv_applies(x, weight, x_mask)) return cuda::invconv_mix(x, weight, x_mask);
#endif
  if (cpu::flow_reverse_applies(x, x_mask)) return cpu::invconv_mix(x, weight, x_mask);
  if (cpu::invconv_train_applies(x, weight, x_mask)) return cpu::invconv_mix_train(x, weight, x_mask);
  return invconv_mix_reference(x, weight, x_mask);
}

std::pair<torch::Tensor, torch::Tensor> coupling_affine_reference(const torch::Tensor& x, const torch::Tensor& out,
                                                                  const torch::Tensor& bias,
                                                                  const torch::Tensor& x_mask) {
  const int64_t half = x.size(1) / 2;
  const auto halves = x.split(half, 1);
  const auto m_and_logs = (out + bias.view({1, -1, 1})).split(half, 1);
  const auto& m = m_and_logs[0];
  const auto& logs = m_and_logs[1];
  auto z_1 = (m + torch::exp(logs) * halves[1]) * x_mask;
  return {torch::cat({halves[0], z_1}, 1), (logs * x_mask).sum({1, 2})};
}

std::pair<torch::Tensor, torch::Tensor> coupling_affine(const torch::Tensor& x, const torch::Tensor& out,
                                                        const torch::Tensor& bias, const torch::Tensor& x_mask) {
#ifdef MONOFLOW_HAS_CUDA
  if (cuda::fused_coupling_applies(x, out, bias, x_mask)) return cuda::coupling_affine(x, out, bias, x_mask);
#endif
  return coupling_affine_reference(x, out, bias, x_mask);
}

torch::Tensor coupling_reverse_reference(const torch::Tensor& x, const torch::Tensor& m_and_logs,
                                         const torch::Tensor& x_mask) {
  const int64_t half = x.size(1) / 2;
  const auto halves = x.split(half, 1);
  const auto m_logs = m_and_logs.split(half, 1);
  return torch::cat({halves[0], (halves[1] - m_logs[0]) * torch::exp(-m_logs[1]) * x_mask}, 1);
}

torch::Tensor coupling_reverse(const torch::Tensor& x, const torch::Tensor& m_and_logs, const torch::Tensor& x_mask) {
  if (cpu::flow_reverse_applies(x, x_mask)) return cpu::coupling_reverse(x, m_and_logs, x_mask);
  return coupling_reverse_reference(x, m_and_logs, x_mask);
}

}  // namespace monoflow::models
