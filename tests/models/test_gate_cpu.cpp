// gated_activation_cpu: the CPU's one-pass WaveNet gate against the composite (tanh, sigmoid,
// product, autograd's backward) in double, across the vector body and the scalar remainder of
// each row; its extremes; its independence of the thread count; and the WN layer's dispatch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <string>
#include <utility>

#include "models/gate_cpu.h"
#include "models/wn_fused.h"

namespace {

using monoflow::models::gate_cpu_applies;
using monoflow::models::gated_activation;
using monoflow::models::gated_activation_cpu;
using monoflow::models::gated_activation_reference;

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// The gate and both halves' gradients for a fixed upstream gradient, in double through the
// composite (the reference).
struct Expected {
  torch::Tensor out, grad;
};
Expected reference(const torch::Tensor& x, const torch::Tensor& upstream) {
  auto xd = x.to(torch::kDouble).detach().requires_grad_();
  auto out = gated_activation_reference(xd);
  out.backward(upstream.to(torch::kDouble));
  return {out.detach(), xd.grad()};
}

TEST(GateCpu, MatchesTheCompositeInDoubleForwardAndBackward) {
  torch::manual_seed(3);
  // Frame counts below, at and around the eight-lane vector, and a long row; one and several
  // items and channels.
  for (const int64_t frames : {1, 7, 8, 9, 17, 500}) {
    for (const auto& [batch, h] : {std::pair<int64_t, int64_t>{1, 1}, {3, 4}, {2, 48}}) {
      SCOPED_TRACE("frames " + std::to_string(frames) + ", batch " + std::to_string(batch) + ", h " +
                   std::to_string(h));
      const auto x = (torch::randn({batch, 2 * h, frames}) * 3).requires_grad_();
      const auto upstream = torch::randn({batch, h, frames});
      const auto want = reference(x, upstream);
      const auto out = gated_activation_cpu(x);
      ASSERT_EQ(out.sizes(), want.out.sizes());
      EXPECT_LE(max_abs_diff(out, want.out), 3e-7);
      out.backward(upstream);
      EXPECT_LE(max_abs_diff(x.grad(), want.grad), 1e-6);
    }
  }
}

TEST(GateCpu, SaturatesWithoutOverflowAndKeepsSmallInputsExactEnough) {
  // a, then b: large magnitudes saturate tanh and sigmoid, tiny ones sit on the slopes.
  const auto a = torch::tensor({-100.0f, -20.0f, -1e-4f, 0.0f, 1e-6f, 1e-4f, 20.0f, 100.0f, 3.0f});
  const auto b = torch::tensor({100.0f, -100.0f, 0.0f, 5.0f, 0.0f, -1e-4f, 100.0f, -100.0f, 89.0f});
  const auto x = torch::cat({a, b}).view({1, 2, 9}).requires_grad_();
  const auto upstream = torch::ones({1, 1, 9});
  const auto want = reference(x, upstream);
  const auto out = gated_activation_cpu(x);
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  EXPECT_LE(max_abs_diff(out, want.out), 3e-7);
  out.backward(upstream);
  EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
  EXPECT_LE(max_abs_diff(x.grad(), want.grad), 1e-6);
  EXPECT_EQ(out[0][0][3].item<float>(), 0.0f);  // tanh(0) = 0 exactly
}

TEST(GateCpu, GivesTheSameBitsOnOneAndFourThreads) {
  torch::manual_seed(5);
  const auto x = torch::randn({4, 96, 333});
  const auto upstream = torch::randn({4, 48, 333});
  const int threads = at::get_num_threads();
  auto run = [&](int n) {
    at::set_num_threads(n);
    const auto xi = x.clone().requires_grad_();
    const auto out = gated_activation_cpu(xi);
    out.backward(upstream);
    return std::pair{out.detach(), xi.grad()};
  };
  const auto one = run(1), four = run(4);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one.first, four.first));
  EXPECT_TRUE(torch::equal(one.second, four.second));
}

TEST(GateCpu, TakesNonContiguousInputAndRefusesOtherTensors) {
  torch::manual_seed(7);
  const auto base = torch::randn({2, 5, 6});
  const auto x = base.transpose(1, 2);  // [2, 6, 5], not contiguous
  EXPECT_LE(max_abs_diff(gated_activation_cpu(x), gated_activation_reference(x.to(torch::kDouble))), 3e-7);
  EXPECT_FALSE(gate_cpu_applies(torch::randn({2, 6, 5}, torch::kDouble)));
  EXPECT_FALSE(gate_cpu_applies(torch::randn({2, 5, 4})));  // odd channel count
  EXPECT_THROW(gated_activation_cpu(torch::randn({2, 5, 4})), c10::Error);
}

TEST(GateCpu, IsWhatTheWnLayerDispatchTakesOnTheCpu) {
  // gated_activation without a bias or dropout takes gated_activation_cpu for float32 CPU
  // tensors: the same bits; with a bias it keeps the composite.
  torch::manual_seed(9);
  const auto x = torch::randn({2, 8, 13});
  EXPECT_TRUE(torch::equal(gated_activation(x), gated_activation_cpu(x)));
  const auto bias = torch::randn({8});
  EXPECT_TRUE(torch::equal(gated_activation(x, bias), gated_activation_reference(x, bias)));
}

}  // namespace
