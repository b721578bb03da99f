// The decoder flows' fused ops (models/flow_fused.h): CUDA kernels against the composite
// references, forward and backward (GPU tests skip without a device); the CPU dispatch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/flow_fused.h"

namespace monoflow::models {
namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

torch::Tensor mask_of(const std::vector<int64_t>& lengths, int64_t t) {
  return (torch::arange(t).unsqueeze(0) < torch::tensor(lengths).unsqueeze(1)).to(torch::kFloat).unsqueeze(1);
}

// A flow's test input on the GPU: x, an upstream gradient and a mask whose first item is half
// padding.
struct FlowInput {
  int64_t b, c, t;
  torch::Tensor x, grad, mask;
  std::string name() const { return std::to_string(b) + "x" + std::to_string(c) + "x" + std::to_string(t); }
};
FlowInput flow_input(int64_t b, int64_t c, int64_t t) {
  std::vector<int64_t> lengths(b, t);
  lengths[0] = t / 2;
  return {b, c, t, torch::randn({b, c, t}, torch::kCUDA), torch::randn({b, c, t}, torch::kCUDA),
          mask_of(lengths, t).to(torch::kCUDA)};
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
  for (const FlowInput& s : {flow_input(32, 160, 256), flow_input(3, 5, 37)}) {
    SCOPED_TRACE("shape " + s.name());
    const auto &x = s.x, &grad = s.grad, &mask = s.mask;
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
  for (const FlowInput& s : {flow_input(32, 160, 256), flow_input(3, 8, 37)}) {
    SCOPED_TRACE("shape " + s.name());
    const auto &x = s.x, &grad = s.grad, &mask = s.mask;
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

TEST(FlowFusedCuda, CouplingAffineMatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(11);
  struct Case {
    int64_t b, c, t;
    torch::ScalarType out_dtype;
  };
  for (const Case k : {Case{32, 160, 256, torch::kFloat}, Case{3, 10, 37, torch::kFloat},
                       Case{4, 160, 100, torch::kBFloat16}}) {
    SCOPED_TRACE("shape " + std::to_string(k.b) + "x" + std::to_string(k.c) + "x" + std::to_string(k.t) + " " +
                 c10::toString(k.out_dtype));
    std::vector<int64_t> lengths(k.b, k.t);
    lengths[0] = k.t / 2;
    auto mask = mask_of(lengths, k.t).to(torch::kCUDA);
    auto x = torch::randn({k.b, k.c, k.t}, torch::kCUDA);
    // The end convolution's output, channels-last as the coupling network leaves it.
    auto out = (torch::randn({k.b, k.t, k.c}, torch::kCUDA) * 0.5).to(k.out_dtype).transpose(1, 2);
    auto bias = torch::randn({k.c}, torch::kCUDA) * 0.1;
    auto gz = torch::randn({k.b, k.c, k.t}, torch::kCUDA), gl = torch::randn({k.b}, torch::kCUDA);
    std::vector<torch::Tensor> ref, fused;
    for (auto* v : {&ref, &fused}) {
      v->push_back(x.clone().requires_grad_(true));
      v->push_back(out.detach().clone(torch::MemoryFormat::Preserve).requires_grad_(true));
      v->push_back(bias.clone().requires_grad_(true));
    }
    auto [z_ref, ld_ref] = coupling_affine_reference(ref[0], ref[1].to(torch::kFloat), ref[2], mask);
    auto [z, ld] = coupling_affine(fused[0], fused[1], fused[2], mask);
    EXPECT_LE(max_abs_diff(z, z_ref), 1e-5);
    EXPECT_LE(max_abs_diff(ld, ld_ref), 1e-3 * std::max(1.0, ld_ref.abs().max().item<double>()));
    torch::autograd::backward({z_ref, ld_ref}, {gz, gl});
    torch::autograd::backward({z, ld}, {gz, gl});
    const double out_tolerance = k.out_dtype == torch::kFloat ? 1e-5 : 1e-2;
    EXPECT_LE(max_abs_diff(fused[0].grad(), ref[0].grad()), 1e-5);
    EXPECT_EQ(fused[1].grad().scalar_type(), k.out_dtype);
    EXPECT_LE(max_abs_diff(fused[1].grad(), ref[1].grad()),
              out_tolerance * std::max(1.0, ref[1].grad().abs().max().item<double>()));
    EXPECT_LE(max_abs_diff(fused[2].grad(), ref[2].grad()),
              (k.out_dtype == torch::kFloat ? 1e-4 : 5e-2) * std::max(1.0, ref[2].grad().abs().max().item<double>()));
  }
}

}  // namespace
}  // namespace monoflow::models
