// mle_loss on the CPU in float32 (mle_loss_cpu.h, one pass each way) against the original's
// composite in double, across the vector body and the scalar remainder of each row; the same bits
// for any thread count; a loss that overflows stays infinite; and mle_loss's dispatch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "models/losses.h"
#include "models/mle_loss_cpu.h"

namespace {

using monoflow::models::mle_loss;
using monoflow::models::mle_loss_reference;
using monoflow::models::cpu::mle_loss_cpu;
using monoflow::models::cpu::mle_loss_cpu_applies;

// What the model hands the loss: z, z_m, z_logs zero beyond each item's frames, logdet per item.
struct Inputs {
  torch::Tensor z, z_m, z_logs, logdet, z_mask;
  std::vector<torch::Tensor> all() const { return {z, z_m, z_logs, logdet, z_mask}; }
};

Inputs make_inputs(int64_t b, int64_t c, int64_t frames, uint64_t seed) {
  torch::manual_seed(static_cast<int64_t>(seed));
  Inputs in;
  in.z_mask = torch::ones({b, 1, frames});
  for (int64_t i = 1; i < b; ++i) in.z_mask[i].slice(1, frames - (i * frames) / (2 * b)).zero_();
  in.z = torch::randn({b, c, frames}) * in.z_mask;
  in.z_m = torch::randn({b, c, frames}) * in.z_mask;
  in.z_logs = 0.4 * torch::randn({b, c, frames}) * in.z_mask;
  in.logdet = 10.0 * torch::randn({b});
  return in;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

TEST(MleLossCpu, MatchesTheCompositeInDoubleWithItsGradients) {
  // Frame counts below, at and around the eight-lane vector, and a long row.
  for (const int64_t frames : {1, 7, 8, 9, 37, 901}) {
    SCOPED_TRACE("frames " + std::to_string(frames));
    const Inputs in = make_inputs(3, 5, frames, 11 + static_cast<uint64_t>(frames));
    ASSERT_TRUE(mle_loss_cpu_applies(in.z, in.z_m, in.z_logs, in.logdet, in.z_mask));
    std::vector<torch::Tensor> f, d;
    for (const auto& t : in.all()) {
      f.push_back(t.clone().requires_grad_(t.dim() != 3 || t.size(1) != 1));
      d.push_back(t.to(torch::kDouble).requires_grad_(t.dim() != 3 || t.size(1) != 1));
    }
    const auto fused = mle_loss_cpu(f[0], f[1], f[2], f[3], f[4]);
    const auto expected = mle_loss_reference(d[0], d[1], d[2], d[3], d[4]);
    EXPECT_EQ(fused.scalar_type(), torch::kFloat);
    EXPECT_EQ(fused.dim(), 0);
    EXPECT_NEAR(fused.item<double>(), expected.item<double>(), 1e-6 * std::max(1.0, std::fabs(expected.item<double>())));
    (2.5 * fused).backward();
    (2.5 * expected).backward();
    for (int i = 0; i < 4; ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      ASSERT_TRUE(f[static_cast<size_t>(i)].grad().defined());
      const double scale = d[static_cast<size_t>(i)].grad().abs().max().item<double>();
      EXPECT_GT(scale, 0.0);
      EXPECT_LE(max_abs_diff(f[static_cast<size_t>(i)].grad(), d[static_cast<size_t>(i)].grad()), 2e-6 * scale);
    }
  }
}

TEST(MleLossCpu, TheSameBitsForAnyThreadCount) {
  const Inputs in = make_inputs(4, 80, 333, 5);
  const int threads = at::get_num_threads();
  std::vector<float> values;
  std::vector<torch::Tensor> grads;
  for (const int n : {1, 2, 3, 8}) {
    at::set_num_threads(n);
    auto z_logs = in.z_logs.clone().requires_grad_();
    const auto l = mle_loss_cpu(in.z, in.z_m, z_logs, in.logdet, in.z_mask);
    l.backward();
    values.push_back(l.item<float>());
    grads.push_back(z_logs.grad());
  }
  at::set_num_threads(threads);
  for (size_t i = 1; i < values.size(); ++i) {
    EXPECT_EQ(values[i], values[0]);
    EXPECT_TRUE(torch::equal(grads[i], grads[0]));
  }
}

TEST(MleLossCpu, OverflowNearItAndNaNAsTheCompositeGivesThem) {
  const Inputs in = make_inputs(2, 3, 16, 7);
  auto z_logs = in.z_logs.clone();
  z_logs[0][1][2] = -50.0f;  // exp(100) is beyond float's range
  auto z = in.z.clone();
  z[0][1][2] = 1.0f;
  const auto fused = mle_loss_cpu(z, in.z_m, z_logs, in.logdet, in.z_mask);
  const auto composite = mle_loss_reference(z, in.z_m, z_logs, in.logdet, in.z_mask);
  EXPECT_TRUE(std::isinf(composite.item<float>()));
  EXPECT_TRUE(std::isinf(fused.item<float>()));
  // Just inside float's range: exp(88.6) (x 0.25 here) is finite, and so must both be.
  z_logs[0][1][2] = -44.3f;
  z[0][1][2] = in.z_m[0][1][2].item<float>() + 0.5f;
  EXPECT_TRUE(std::isfinite(mle_loss_reference(z, in.z_m, z_logs, in.logdet, in.z_mask).item<float>()));
  EXPECT_TRUE(std::isfinite(mle_loss_cpu(z, in.z_m, z_logs, in.logdet, in.z_mask).item<float>()));
  // A NaN log-scale: a NaN loss, and NaN gradients at its element as the composite's.
  z_logs[0][1][2] = std::nanf("");
  auto l = z_logs.clone().requires_grad_();
  const auto nan_loss = mle_loss_cpu(z, in.z_m, l, in.logdet, in.z_mask);
  EXPECT_TRUE(std::isnan(nan_loss.item<float>()));
  nan_loss.backward();
  EXPECT_TRUE(std::isnan(l.grad()[0][1][2].item<float>()));
  EXPECT_TRUE(std::isfinite(l.grad()[1][1][2].item<float>()));
}

TEST(MleLossCpu, MleLossTakesItForFloatCpuTensorsAndTheCompositeOtherwise) {
  const Inputs in = make_inputs(2, 4, 21, 9);
  const auto via = mle_loss(in.z, in.z_m, in.z_logs, in.logdet, in.z_mask);
  EXPECT_EQ(via.item<float>(), mle_loss_cpu(in.z, in.z_m, in.z_logs, in.logdet, in.z_mask).item<float>());
  // Double tensors (align's per-utterance losses) and a mask over every channel keep the composite.
  const auto d = [](const torch::Tensor& t) { return t.to(torch::kDouble); };
  EXPECT_FALSE(mle_loss_cpu_applies(d(in.z), d(in.z_m), d(in.z_logs), d(in.logdet), d(in.z_mask)));
  EXPECT_EQ(mle_loss(d(in.z), d(in.z_m), d(in.z_logs), d(in.logdet), d(in.z_mask)).item<double>(),
            mle_loss_reference(d(in.z), d(in.z_m), d(in.z_logs), d(in.logdet), d(in.z_mask)).item<double>());
  EXPECT_FALSE(mle_loss_cpu_applies(in.z, in.z_m, in.z_logs, in.logdet, in.z_mask.expand({2, 4, 21})));
}

}  // namespace
