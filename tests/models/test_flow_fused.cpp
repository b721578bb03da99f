// The decoder flows' fused ops (models/flow_fused.h): CUDA kernels against the composite
// references, forward and backward (GPU tests skip without a device); the CPU dispatch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "models/flow_fused.h"

namespace monoflow::models {
namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

torch::Tensor mask_of(const std::vector<int64_t>& lengths, int64_t t) {
  return (torch::arange(t).unsqueeze(0) < torch::tensor(lengths).unsqueeze(1)).to(torch::kFloat).unsqueeze(1);
}

TEST(FlowFused, CpuActNormIsTheAffineMap) {
  auto x = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({1, 2, 2});
  auto logs = torch::tensor({0.0f, std::log(2.0f)}).view({1, 2, 1});
  auto bias = torch::tensor({1.0f, -1.0f}).view({1, 2, 1});
  auto mask = torch::tensor({1.0f, 0.0f}).view({1, 1, 2});
  EXPECT_TRUE(torch::allclose(actnorm_affine(x, logs, bias, mask), torch::tensor({2.0f, 0.0f, 5.0f, 0.0f}).view({1, 2, 2})));
}

TEST(FlowFusedCuda, ActNormMatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(9);
  struct Shape {
    int64_t b, c, t;
  };
  for (const Shape s : {Shape{32, 160, 256}, Shape{3, 5, 37}}) {
    SCOPED_TRACE("shape " + std::to_string(s.b) + "x" + std::to_string(s.c) + "x" + std::to_string(s.t));
    std::vector<int64_t> lengths(s.b, s.t);
    lengths[0] = s.t / 2;
    auto mask = mask_of(lengths, s.t).to(torch::kCUDA);
    auto x = torch::randn({s.b, s.c, s.t}, torch::kCUDA);
    auto grad = torch::randn({s.b, s.c, s.t}, torch::kCUDA);
    auto logs = torch::randn({1, s.c, 1}, torch::kCUDA) * 0.3;
    auto bias = torch::randn({1, s.c, 1}, torch::kCUDA);
    std::vector<torch::Tensor> ref{x.clone().requires_grad_(true), logs.clone().requires_grad_(true),
                                   bias.clone().requires_grad_(true)};
    std::vector<torch::Tensor> fused{x.clone().requires_grad_(true), logs.clone().requires_grad_(true),
                                     bias.clone().requires_grad_(true)};
    auto y_ref = actnorm_affine_reference(ref[0], ref[1], ref[2], mask);
    auto y = actnorm_affine(fused[0], fused[1], fused[2], mask);
    EXPECT_LE(max_abs_diff(y, y_ref), 1e-5);
    EXPECT_EQ(y.slice(2, s.t / 2)[0].abs().sum().item<double>(), 0.0);  // padding stays zero
    y_ref.backward(grad);
    y.backward(grad);
    const char* names[] = {"x", "logs", "bias"};
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(names[k]);
      // Parameter gradients sum B * T values: relative to their size.
      const double scale = std::max(1.0, ref[k].grad().abs().max().item<double>());
      EXPECT_LE(max_abs_diff(fused[k].grad(), ref[k].grad()), 1e-5 * scale);
    }
  }
}

TEST(FlowFused, CpuInvConvMixesGroupsOfFour) {
  // Channels (0, 1 | 4, 5) form group 0 and (2, 3 | 6, 7) group 1: swapping the first two of
  // each group's four swaps channels 0 <-> 1 and 2 <-> 3.
  auto x = torch::arange(8, torch::kFloat).view({1, 8, 1});
  auto swap = torch::zeros({4, 4});
  swap[0][1] = swap[1][0] = swap[2][2] = swap[3][3] = 1.0f;
  auto z = invconv_mix(x, swap, torch::ones({1, 1, 1}));
  EXPECT_TRUE(torch::equal(z.flatten(), torch::tensor({1.0f, 0.0f, 3.0f, 2.0f, 4.0f, 5.0f, 6.0f, 7.0f})));
}

TEST(FlowFusedCuda, InvConvMatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  at::globalContext().setAllowTF32CuDNN(false);
  torch::manual_seed(10);
  struct Shape {
    int64_t b, c, t;
  };
  for (const Shape s : {Shape{32, 160, 256}, Shape{3, 8, 37}}) {
    SCOPED_TRACE("shape " + std::to_string(s.b) + "x" + std::to_string(s.c) + "x" + std::to_string(s.t));
    std::vector<int64_t> lengths(s.b, s.t);
    lengths[0] = s.t / 2;
    auto mask = mask_of(lengths, s.t).to(torch::kCUDA);
    auto x = torch::randn({s.b, s.c, s.t}, torch::kCUDA);
    auto grad = torch::randn({s.b, s.c, s.t}, torch::kCUDA);
    auto w = torch::randn({4, 4}, torch::kCUDA);
    auto x_ref = x.clone().requires_grad_(true), w_ref = w.clone().requires_grad_(true);
    auto x_fused = x.clone().requires_grad_(true), w_fused = w.clone().requires_grad_(true);
    auto z_ref = invconv_mix_reference(x_ref, w_ref, mask);
    auto z = invconv_mix(x_fused, w_fused, mask);
    EXPECT_LE(max_abs_diff(z, z_ref), 1e-4);
    z_ref.backward(grad);
    z.backward(grad);
    EXPECT_LE(max_abs_diff(x_fused.grad(), x_ref.grad()), 1e-4);
    const double scale = std::max(1.0, w_ref.grad().abs().max().item<double>());
    EXPECT_LE(max_abs_diff(w_fused.grad(), w_ref.grad()), 1e-5 * scale);
  }
  at::globalContext().setAllowTF32CuDNN(true);
}

}  // namespace
}  // namespace monoflow::models
