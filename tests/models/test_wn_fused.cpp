// The WN layer's fused ops (models/wn_fused.h): the CUDA kernels against the composite
// references, forward and backward, in both layouts and every kernel dtype (GPU tests skip
// without a device); the layout helpers and the CPU dispatch on any machine.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "models/autocast.h"
#include "models/modules.h"
#include "models/wn_fused.h"

namespace monoflow::models {
namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

// A [B, C, T] tensor with the given layout (values identical either way).
torch::Tensor randn_in(int64_t b, int64_t c, int64_t t, bool channels_last, torch::TensorOptions options) {
  auto x = torch::randn({b, c, t}, torch::TensorOptions().dtype(torch::kFloat)).to(options);
  return channels_last ? to_channels_last_1d(x) : x;
}

torch::Tensor mask_of(const std::vector<int64_t>& lengths, int64_t t, torch::Device device) {
  auto range = torch::arange(t).unsqueeze(0);
  auto len = torch::tensor(lengths).unsqueeze(1);
  return (range < len).to(torch::kFloat).unsqueeze(1).to(device);
}

TEST(WnFused, ChannelsLastHelpers) {
  auto x = torch::arange(24, torch::kFloat).view({2, 3, 4});
  EXPECT_FALSE(is_channels_last_1d(x));
  auto y = to_channels_last_1d(x);
  EXPECT_TRUE(is_channels_last_1d(y));
  EXPECT_EQ(y.strides(), (std::vector<int64_t>{12, 1, 3}));
  EXPECT_TRUE(torch::equal(x, y));
  EXPECT_EQ(to_channels_last_1d(y).data_ptr(), y.data_ptr());  // already channels-last: no copy
}

TEST(WnFused, CpuDispatchComputesTheGateAndTheUpdate) {
  auto x_in = torch::tensor({0.5f, -1.0f, 2.0f, 0.25f}).view({1, 4, 1});
  auto acts = gated_activation(x_in);
  EXPECT_NEAR(acts[0][0][0].item<float>(), std::tanh(0.5f) / (1 + std::exp(-2.0f)), 1e-6);
  EXPECT_NEAR(acts[0][1][0].item<float>(), std::tanh(-1.0f) / (1 + std::exp(-0.25f)), 1e-6);

  auto x = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({1, 2, 2});
  auto skip = torch::tensor({10.0f, 20.0f, 30.0f, 40.0f}).view({1, 2, 2});
  auto res_skip = torch::arange(8, torch::kFloat).view({1, 4, 2});
  auto mask = torch::tensor({1.0f, 0.0f}).view({1, 1, 2});
  auto out = residual_skip(x, skip, res_skip, {}, mask);
  EXPECT_TRUE(torch::equal(out.x, torch::tensor({1.0f, 0.0f, 5.0f, 0.0f}).view({1, 2, 2})));
  EXPECT_TRUE(torch::equal(out.skip, torch::tensor({14.0f, 25.0f, 36.0f, 47.0f}).view({1, 2, 2})));
  // With the res_skip layer's bias (res channels 0-1, skip channels 2-3).
  auto bias = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f});
  out = residual_skip(x, skip, res_skip, bias, mask);
  EXPECT_TRUE(torch::equal(out.x, torch::tensor({2.0f, 0.0f, 7.0f, 0.0f}).view({1, 2, 2})));
  EXPECT_TRUE(torch::equal(out.skip, torch::tensor({17.0f, 28.0f, 40.0f, 51.0f}).view({1, 2, 2})));
  // No skip sum yet (a WN's first layer): the skip half plus its bias.
  out = residual_skip(x, {}, res_skip, bias, mask);
  EXPECT_TRUE(torch::equal(out.x, torch::tensor({2.0f, 0.0f, 7.0f, 0.0f}).view({1, 2, 2})));
  EXPECT_TRUE(torch::equal(out.skip, torch::tensor({7.0f, 8.0f, 10.0f, 11.0f}).view({1, 2, 2})));
  // The masked sum: (x + res + bias) * mask, x optional.
  auto res = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({1, 2, 2});
  auto sum_bias = torch::tensor({0.5f, -1.0f});
  EXPECT_TRUE(torch::equal(masked_sum(x, res, sum_bias, mask).out,
                           torch::tensor({2.5f, 0.0f, 5.0f, 0.0f}).view({1, 2, 2})));
  auto start = masked_sum({}, res, sum_bias, mask, /*with_low=*/true);
  EXPECT_TRUE(torch::equal(start.out, torch::tensor({1.5f, 0.0f, 2.0f, 0.0f}).view({1, 2, 2})));
  EXPECT_TRUE(torch::equal(start.out_low, start.out));
  const auto low_only = masked_sum({}, res, sum_bias, mask, /*with_low=*/true, /*low_only=*/true);
  EXPECT_FALSE(low_only.out.defined());
  EXPECT_TRUE(torch::equal(low_only.out_low, start.out));
  // The gate with a bias: tanh(0.5 + 1) * sigmoid(2 - 1).
  auto gate_bias = torch::tensor({1.0f, 0.0f, -1.0f, 0.0f});
  EXPECT_NEAR(gated_activation(x_in, gate_bias)[0][0][0].item<float>(), std::tanh(1.5f) / (1 + std::exp(-1.0f)), 1e-6);
}

struct Case {
  torch::ScalarType dtype;
  bool channels_last;
  int64_t b, h, t;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    for (bool cl : {false, true}) {
      out.push_back({dtype, cl, 4, 192, 96});  // packed path
      out.push_back({dtype, cl, 3, 5, 37});    // odd sizes: element-wise path
    }
  }
  return out;
}

// Tolerances, relative to the largest reference value: float matches the composite to a few
// ulp; 16-bit types round once where the composite rounds after every op, so they differ by
// about one unit of their precision (bfloat16 2^-8, half 2^-11).
double tolerance(torch::ScalarType dtype) {
  return dtype == torch::kFloat ? 2e-6 : dtype == torch::kBFloat16 ? 1e-2 : 2e-3;
}
double scale_of(const torch::Tensor& reference) {
  return std::max(1.0, reference.abs().max().item<double>());
}

// What SCOPED_TRACE shows of a case.
std::string describe(const Case& c) {
  return std::string(c10::toString(c.dtype)) + (c.channels_last ? " channels-last" : " contiguous") +
         " H=" + std::to_string(c.h) + " T=" + std::to_string(c.t);
}

torch::TensorOptions cuda_float() { return torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA); }

// The case's x_mask [B, 1, T] on the GPU, with padding inside the batch: item 0 is half as long.
torch::Tensor padded_mask(const Case& c) {
  std::vector<int64_t> lengths(c.b, c.t);
  lengths[0] = c.t / 2;
  return mask_of(lengths, c.t, torch::kCUDA);
}

// Fresh leaves (requiring grad) with the values and layouts of `inputs`: the reference and the
// fused op each get their own, so that their gradients can be compared.
std::vector<torch::Tensor> leaf_copies(const std::vector<torch::Tensor>& inputs) {
  std::vector<torch::Tensor> out;
  for (const auto& t : inputs) out.push_back(t.detach().clone(torch::MemoryFormat::Preserve).requires_grad_(true));
  return out;
}

// On the CPU in float32 the residual update and the masked sum are one pass each way
// (residual_cpu.h): the references' values and gradients to the bit, padding included.
TEST(WnFused, CpuResidualOpsEqualTheReferencesWithGradients) {
  torch::manual_seed(11);
  const int64_t b = 3, h = 5, t = 37;
  const auto mask = mask_of({37, 20, 1}, t, torch::kCPU);
  std::vector<torch::Tensor> inputs{torch::randn({b, h, t}), torch::randn({b, h, t}), torch::randn({b, 2 * h, t})};
  auto ref_in = leaf_copies(inputs), op_in = leaf_copies(inputs);
  auto [rx, rs] = residual_skip_reference(ref_in[0], ref_in[1], ref_in[2], {}, mask);
  auto out = residual_skip(op_in[0], op_in[1], op_in[2], {}, mask, /*with_low=*/true);
  EXPECT_NE(out.x.grad_fn()->name().find("ResidualSkipCpu"), std::string::npos) << out.x.grad_fn()->name();
  EXPECT_TRUE(torch::equal(out.x, rx));
  EXPECT_TRUE(torch::equal(out.skip, rs));
  EXPECT_TRUE(torch::equal(out.x_low, out.x));
  EXPECT_EQ(out.x[2].slice(1, 1).abs().sum().item<double>(), 0.0);  // item 2 is one frame long
  const auto gx = torch::randn({b, h, t}), gs = torch::randn({b, h, t});
  torch::autograd::backward({rx, rs}, {gx, gs});
  torch::autograd::backward({out.x, out.skip}, {gx, gs});
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(torch::equal(op_in[k].grad(), ref_in[k].grad())) << "input " << k;

  for (const bool with_x : {true, false}) {
    SCOPED_TRACE(with_x ? "masked sum with x" : "masked sum without x");
    std::vector<torch::Tensor> sum_inputs{torch::randn({b, h, t}), torch::randn({b, h, t})};
    auto ref = leaf_copies(sum_inputs), op = leaf_copies(sum_inputs);
    auto r = masked_sum_reference(with_x ? ref[1] : torch::Tensor(), ref[0], {}, mask);
    auto o = masked_sum(with_x ? op[1] : torch::Tensor(), op[0], {}, mask).out;
    EXPECT_NE(o.grad_fn()->name().find("MaskedSumCpu"), std::string::npos) << o.grad_fn()->name();
    EXPECT_TRUE(torch::equal(o, r));
    r.backward(gx);
    o.backward(gx);
    EXPECT_TRUE(torch::equal(op[0].grad(), ref[0].grad()));
    if (with_x) EXPECT_TRUE(torch::equal(op[1].grad(), ref[1].grad()));
  }
}

// The kernels' tests: skipped without a GPU.
class WnFusedCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(WnFusedCuda, GateMatchesTheReferenceForwardAndBackward) {
  torch::manual_seed(3);
  for (const auto& c : cases()) {
    SCOPED_TRACE(describe(c));
    auto options = torch::TensorOptions().dtype(c.dtype).device(torch::kCUDA);
    auto x_ref = (randn_in(c.b, 2 * c.h, c.t, c.channels_last, options) * 2).detach().requires_grad_(true);
    auto x_fused = x_ref.detach().clone(torch::MemoryFormat::Preserve).requires_grad_(true);
    auto bias_ref = (torch::randn({2 * c.h}, torch::kCUDA) * 0.5).requires_grad_(true);
    auto bias_fused = bias_ref.detach().clone().requires_grad_(true);
    auto grad = randn_in(c.b, c.h, c.t, c.channels_last, options);

    // The reference adds a float bias to a 16-bit input in float, as the kernel does.
    auto ref = gated_activation_reference(x_ref.to(torch::kFloat), bias_ref).to(c.dtype);
    auto fused = gated_activation(x_fused, bias_fused);
    EXPECT_EQ(fused.scalar_type(), c.dtype);
    EXPECT_EQ(is_channels_last_1d(fused), c.channels_last && c.t > 1);
    EXPECT_LE(max_abs_diff(fused, ref), tolerance(c.dtype) * scale_of(ref));
    ref.backward(grad);
    fused.backward(grad);
    EXPECT_LE(max_abs_diff(x_fused.grad(), x_ref.grad()), tolerance(c.dtype) * scale_of(x_ref.grad()));
    EXPECT_EQ(bias_fused.grad().scalar_type(), torch::kFloat);
    // The bias gradient sums B * T 16-bit values: a few units of their precision apart.
    EXPECT_LE(max_abs_diff(bias_fused.grad(), bias_ref.grad()),
              (c.dtype == torch::kFloat ? 1e-4 : 20 * tolerance(c.dtype)) * scale_of(bias_ref.grad()));
    EXPECT_GT(x_ref.grad().abs().sum().item<double>(), 0.0);
  }
}

// Dropout inside the gate: with a = b = 1 and no bias, each output shows which of its two
// inputs were dropped (kept: tanh(s) * sigmoid(s) with s = 1 / keep; a dropped: 0; b dropped:
// tanh(s) / 2; both: 0). The recovered masks drop about p of the elements, and the same masks
// give the reference's gradients, so backward used forward's mask: drawn again (float, and
// bf16 contiguous, whose T = 100 rows are not packed) or recorded as bits (bf16 channels-last).
TEST_F(WnFusedCuda, GateDropoutDropsAboutPAndBackwardUsesTheSameMask) {
  torch::manual_seed(6);
  const double p = 0.3, keep = 1 - p, s = 1 / keep;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (bool cl : {false, true}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (cl ? " channels-last" : " contiguous"));
      // Apart by more than 0.25: bf16's rounding and tanh.approx cannot confuse them.
      const double tol = dtype == torch::kFloat ? 1e-5 : 1e-2;
      auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
      auto x = torch::ones({8, 64, 100}, f32.dtype(dtype));
      if (cl) x = to_channels_last_1d(x);
      x.requires_grad_(true);
      auto acts = gated_activation(x, {}, p, /*training=*/true);
      const double both = std::tanh(s) / (1 + std::exp(-s)), b_dropped = std::tanh(s) * 0.5;
      auto a = acts.detach().to(torch::kFloat);
      auto is_both = (a - both).abs() < tol, is_b_dropped = (a - b_dropped).abs() < tol;
      auto is_zero = a.abs() < 1e-7;
      EXPECT_EQ((is_both | is_b_dropped | is_zero).all().item<bool>(), true);
      // a kept <=> output nonzero; b kept is known only where a was kept.
      const double a_kept = (~is_zero).to(torch::kDouble).mean().item<double>();
      const double b_kept_given_a = is_both.to(torch::kDouble).sum().item<double>() /
                                    (~is_zero).to(torch::kDouble).sum().item<double>();
      EXPECT_NEAR(a_kept, keep, 0.01);
      EXPECT_NEAR(b_kept_given_a, keep, 0.01);

      // Backward: where both were kept the gradient is the dropout-free one times s; where a
      // was dropped, d/da is 0. Compare with the reference under the recovered masks there.
      auto grad = torch::randn({8, 32, 100}, f32);
      auto grad_in = grad.to(dtype);
      acts.backward(cl ? to_channels_last_1d(grad_in) : grad_in);
      auto gx = x.grad().detach().to(torch::kFloat);
      auto mask_a = (~is_zero).to(torch::kFloat), mask_b = is_both.to(torch::kFloat);
      auto x_ref = torch::ones({8, 64, 100}, f32).requires_grad_(true);
      auto masks = torch::cat({mask_a, mask_b}, 1);
      auto ref = gated_activation_reference(x_ref * masks * s);
      ref.backward(grad_in.to(torch::kFloat));
      // Compare only where the reference knows the masks (a kept), for both halves.
      auto known = torch::cat({mask_a, mask_a}, 1).to(torch::kBool);
      EXPECT_LE((gx - x_ref.grad()).abs().masked_select(known).max().item<double>(),
                tol * scale_of(x_ref.grad()));
      EXPECT_EQ(gx.slice(1, 0, 32).masked_select(is_zero).abs().max().item<double>(), 0.0);  // dropped a: no gradient
    }
  }
}

TEST_F(WnFusedCuda, ResidualSkipMatchesTheReferenceForwardAndBackward) {
  torch::manual_seed(4);
  for (const auto& c : cases()) {
    SCOPED_TRACE(describe(c));
    const auto f32 = cuda_float();
    auto x = randn_in(c.b, c.h, c.t, c.channels_last, f32);
    auto skip = randn_in(c.b, c.h, c.t, c.channels_last, f32);
    auto res_skip = randn_in(c.b, 2 * c.h, c.t, c.channels_last, f32.dtype(c.dtype));
    auto mask = padded_mask(c);
    std::vector<torch::Tensor> ref_in = leaf_copies({x, skip, res_skip}), fused_in = leaf_copies({x, skip, res_skip});
    auto bias_ref = torch::randn({2 * c.h}, f32).requires_grad_(true);
    auto bias_fused = bias_ref.detach().clone().requires_grad_(true);
    auto [rx, rs] = residual_skip_reference(ref_in[0], ref_in[1], ref_in[2].to(torch::kFloat), bias_ref, mask);
    const auto fused = residual_skip(fused_in[0], fused_in[1], fused_in[2], bias_fused, mask);
    const torch::Tensor &fx = fused.x, &fs = fused.skip;
    EXPECT_EQ(is_channels_last_1d(fx), c.channels_last && c.t > 1);
    EXPECT_LE(max_abs_diff(fx, rx), 1e-6);
    EXPECT_LE(max_abs_diff(fs, rs), 1e-6);
    EXPECT_EQ(fx.slice(2, c.t / 2)[0].abs().sum().item<double>(), 0.0);  // padding stays zero
    auto gx = randn_in(c.b, c.h, c.t, c.channels_last, f32), gs = randn_in(c.b, c.h, c.t, c.channels_last, f32);
    torch::autograd::backward({rx, rs}, {gx, gs});
    torch::autograd::backward({fx, fs}, {gx, gs});
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE("input " + std::to_string(k));
      EXPECT_EQ(fused_in[k].grad().scalar_type(), ref_in[k].grad().scalar_type());
      EXPECT_LE(max_abs_diff(fused_in[k].grad(), ref_in[k].grad()), k == 2 ? tolerance(c.dtype) * 4 : 1e-6);
    }
    EXPECT_LE(max_abs_diff(bias_fused.grad(), bias_ref.grad()),
              (c.dtype == torch::kFloat ? 1e-4 : 20 * tolerance(c.dtype)) * scale_of(bias_ref.grad()));
  }
}

// residual_skip with_low: the same update plus x_out in res_skip's dtype, whose gradient the
// backward kernel adds to x_out's. Against the reference followed by a cast (autograd's).
TEST_F(WnFusedCuda, ResidualSkipLowCopyEqualsTheUpdateFollowedByACast) {
  torch::manual_seed(6);
  for (const auto& c : cases()) {
    SCOPED_TRACE(describe(c));
    const auto f32 = cuda_float();
    auto mask = padded_mask(c);
    std::vector<torch::Tensor> inputs{randn_in(c.b, c.h, c.t, c.channels_last, f32),
                                      randn_in(c.b, c.h, c.t, c.channels_last, f32),
                                      randn_in(c.b, 2 * c.h, c.t, c.channels_last, f32.dtype(c.dtype))};
    std::vector<torch::Tensor> ref_in = leaf_copies(inputs), fused_in = leaf_copies(inputs);
    auto bias = torch::randn({2 * c.h}, f32);
    auto [rx, rs] = residual_skip_reference(ref_in[0], ref_in[1], ref_in[2].to(torch::kFloat), bias, mask);
    auto r_low = rx.to(c.dtype);
    auto [fx, fs, f_low] = residual_skip(fused_in[0], fused_in[1], fused_in[2], bias, mask, /*with_low=*/true);
    EXPECT_EQ(f_low.scalar_type(), c.dtype);
    EXPECT_LE(max_abs_diff(fx, rx), 1e-6);
    EXPECT_LE(max_abs_diff(fs, rs), 1e-6);
    EXPECT_EQ(max_abs_diff(f_low, fx.to(c.dtype)), 0.0);  // exactly x_out rounded
    auto gx = randn_in(c.b, c.h, c.t, c.channels_last, f32), gs = randn_in(c.b, c.h, c.t, c.channels_last, f32);
    auto g_low = randn_in(c.b, c.h, c.t, c.channels_last, f32.dtype(c.dtype));
    torch::autograd::backward({rx, rs, r_low}, {gx, gs, g_low});
    torch::autograd::backward({fx, fs, f_low}, {gx, gs, g_low});
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE("input " + std::to_string(k));
      EXPECT_LE(max_abs_diff(fused_in[k].grad(), ref_in[k].grad()), k == 2 ? tolerance(c.dtype) * 4 : 1e-5);
    }
    // the copy's gradient reached x: without it, x's gradient would be gx * mask alone
    if (c.dtype != torch::kFloat) EXPECT_GT(max_abs_diff(fused_in[0].grad(), gx * mask), 0.1);

    // x_out used only through its copy (the last update before a block's last layer): its
    // gradient is undefined, and the kernel reads it as zero
    if (c.dtype == torch::kFloat) continue;  // there x_low is x_out itself
    ref_in = leaf_copies(ref_in);
    fused_in = leaf_copies(fused_in);
    auto [rx2, rs2] = residual_skip_reference(ref_in[0], ref_in[1], ref_in[2].to(torch::kFloat), bias, mask);
    auto [fx2, fs2, f_low2] = residual_skip(fused_in[0], fused_in[1], fused_in[2], bias, mask, /*with_low=*/true);
    torch::autograd::backward({rs2, rx2.to(c.dtype)}, {gs, g_low});
    torch::autograd::backward({fs2, f_low2}, {gs, g_low});
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE("copy only, input " + std::to_string(k));
      EXPECT_LE(max_abs_diff(fused_in[k].grad(), ref_in[k].grad()), k == 2 ? tolerance(c.dtype) * 4 : 1e-5);
    }
  }
}

// The masked sum (a WN's last layer, a coupling's start): residual_skip's kernels without the skip
// half, with and without x, the bias and the low copy, against the composite and autograd's cast.
TEST_F(WnFusedCuda, MaskedSumMatchesTheReferenceForwardAndBackward) {
  torch::manual_seed(10);
  for (const auto& c : cases()) {
    for (const bool with_x : {true, false}) {
      for (const bool with_bias : {true, false}) {
        SCOPED_TRACE(describe(c) + (with_x ? " x" : " no x") + (with_bias ? " bias" : " no bias"));
        const auto f32 = cuda_float();
        auto mask = padded_mask(c);
        std::vector<torch::Tensor> inputs{randn_in(c.b, c.h, c.t, c.channels_last, f32.dtype(c.dtype)),
                                          torch::randn({c.h}, f32)};
        if (with_x) inputs.push_back(randn_in(c.b, c.h, c.t, c.channels_last, f32));
        auto ref_in = leaf_copies(inputs), fused_in = leaf_copies(inputs);
        const auto x_of = [&](const std::vector<torch::Tensor>& in) { return with_x ? in[2] : torch::Tensor(); };
        const auto bias_of = [&](const std::vector<torch::Tensor>& in) { return with_bias ? in[1] : torch::Tensor(); };
        auto ref = masked_sum_reference(x_of(ref_in), ref_in[0], bias_of(ref_in), mask);
        auto ref_low = ref.to(c.dtype);
        auto [out, out_low] = masked_sum(x_of(fused_in), fused_in[0], bias_of(fused_in), mask, /*with_low=*/true);
        EXPECT_EQ(out.scalar_type(), torch::kFloat);
        EXPECT_EQ(out_low.scalar_type(), c.dtype);
        EXPECT_EQ(is_channels_last_1d(out), c.channels_last && c.t > 1);
        EXPECT_LE(max_abs_diff(out, ref), 1e-6);
        EXPECT_EQ(max_abs_diff(out_low, out.to(c.dtype)), 0.0);  // exactly out rounded
        EXPECT_EQ(out.slice(2, c.t / 2)[0].abs().sum().item<double>(), 0.0);  // padding is zero
        auto g = randn_in(c.b, c.h, c.t, c.channels_last, f32);
        auto g_low = randn_in(c.b, c.h, c.t, c.channels_last, f32.dtype(c.dtype));
        torch::autograd::backward({ref, ref_low}, {g, g_low});
        torch::autograd::backward({out, out_low}, {g, g_low});
        EXPECT_EQ(fused_in[0].grad().scalar_type(), c.dtype);
        EXPECT_LE(max_abs_diff(fused_in[0].grad(), ref_in[0].grad()), tolerance(c.dtype) * 4);
        if (with_x) EXPECT_LE(max_abs_diff(fused_in[2].grad(), ref_in[2].grad()), 1e-5);
        // Where the kernel does not sum the bias's gradient (odd sizes, contiguous), the torch
        // side sums res's rounded gradient: within 16-bit rounding, as residual_skip's.
        const double bias_tol = c.dtype == torch::kFloat ? 1e-4 : 20 * tolerance(c.dtype);
        if (with_bias) {
          EXPECT_LE(max_abs_diff(fused_in[1].grad(), ref_in[1].grad()), bias_tol * scale_of(ref_in[1].grad()));
        } else {
          EXPECT_FALSE(fused_in[1].grad().defined());
        }
        // out alone (the WN's last layer): the low copy's gradient undefined, read as zero.
        fused_in = leaf_copies(inputs);
        ref_in = leaf_copies(inputs);
        masked_sum_reference(x_of(ref_in), ref_in[0], bias_of(ref_in), mask).backward(g);
        masked_sum(x_of(fused_in), fused_in[0], bias_of(fused_in), mask).out.backward(g);
        EXPECT_LE(max_abs_diff(fused_in[0].grad(), ref_in[0].grad()), tolerance(c.dtype) * 4);
        if (with_bias) {
          EXPECT_LE(max_abs_diff(fused_in[1].grad(), ref_in[1].grad()), bias_tol * scale_of(ref_in[1].grad()));
        }
        // The low copy alone (a WN's output under autocast, which only the end product reads):
        // the float sum is neither returned nor written, and the copy and every gradient are the
        // bits of the float sum followed by autograd's cast (what the WN returned before).
        fused_in = leaf_copies(inputs);
        auto cast_in = leaf_copies(inputs);
        masked_sum(x_of(cast_in), cast_in[0], bias_of(cast_in), mask).out.to(c.dtype).backward(g_low);
        const auto only = masked_sum(x_of(fused_in), fused_in[0], bias_of(fused_in), mask, /*with_low=*/true,
                                     /*low_only=*/true);
        EXPECT_FALSE(only.out.defined());
        EXPECT_EQ(only.out_low.scalar_type(), c.dtype);
        EXPECT_EQ(max_abs_diff(only.out_low, out_low), 0.0);
        only.out_low.backward(g_low);
        EXPECT_EQ(max_abs_diff(fused_in[0].grad(), cast_in[0].grad()), 0.0);
        if (with_x) EXPECT_EQ(max_abs_diff(fused_in[2].grad(), cast_in[2].grad()), 0.0);
        if (with_bias) EXPECT_EQ(max_abs_diff(fused_in[1].grad(), cast_in[1].grad()), 0.0);
      }
    }
  }
}

// A WN's first update, whose skip sum starts there: without a skip_sum tensor the kernel reads
// none, with the same values and gradients as a zero one (every dtype and layout).
TEST_F(WnFusedCuda, ResidualSkipWithoutSkipSumEqualsAZeroOne) {
  torch::manual_seed(13);
  for (const auto& c : cases()) {
    SCOPED_TRACE(describe(c));
    const auto f32 = cuda_float();
    auto mask = padded_mask(c);
    std::vector<torch::Tensor> inputs{randn_in(c.b, c.h, c.t, c.channels_last, f32),
                                      randn_in(c.b, 2 * c.h, c.t, c.channels_last, f32.dtype(c.dtype)),
                                      torch::randn({2 * c.h}, f32)};
    auto zero_in = leaf_copies(inputs), none_in = leaf_copies(inputs);
    const auto zeros = torch::zeros_like(inputs[0]);
    auto with_zeros = residual_skip(zero_in[0], zeros, zero_in[1], zero_in[2], mask, /*with_low=*/true);
    auto without = residual_skip(none_in[0], {}, none_in[1], none_in[2], mask, /*with_low=*/true);
    EXPECT_EQ(max_abs_diff(without.x, with_zeros.x), 0.0);
    EXPECT_EQ(max_abs_diff(without.skip, with_zeros.skip), 0.0);
    EXPECT_EQ(max_abs_diff(without.x_low, with_zeros.x_low), 0.0);
    EXPECT_GT(without.skip.abs().max().item<double>(), 0.1);
    auto gx = randn_in(c.b, c.h, c.t, c.channels_last, f32), gs = randn_in(c.b, c.h, c.t, c.channels_last, f32);
    auto g_low = randn_in(c.b, c.h, c.t, c.channels_last, f32.dtype(c.dtype));
    torch::autograd::backward({with_zeros.x, with_zeros.skip, with_zeros.x_low}, {gx, gs, g_low});
    torch::autograd::backward({without.x, without.skip, without.x_low}, {gx, gs, g_low});
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE("input " + std::to_string(k));
      EXPECT_EQ(max_abs_diff(none_in[k].grad(), zero_in[k].grad()), 0.0);
    }
  }
}

// Per-column sums of a [B, C, T] gradient, and of its absolute values, in float64.
std::pair<torch::Tensor, torch::Tensor> channel_sums(const torch::Tensor& grad) {
  const auto g = grad.detach().cpu().to(torch::kDouble);
  return {g.sum(at::IntArrayRef{0, 2}), g.abs().sum(at::IntArrayRef{0, 2})};
}

// With channels-last rows the backward kernels sum the bias's gradient as they write the input's
// (the residual update in every dtype, the gate in float; blocks of 16 rows; 3 x 101 = 303 rows:
// 19 blocks, the last one short; one block at T = 5), bf16's gate by a second pass over its
// rounded gradient: either way within one rounding of the column's absolute sum of the gradient
// (float: a few ulp of that sum), with dropout too, and the same bits on a second backward.
TEST_F(WnFusedCuda, BackwardKernelsSumTheBiasGradientOfTheirRows) {
  torch::manual_seed(8);
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (const int64_t t : {101, 5}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " T=" + std::to_string(t));
      const double rounding = dtype == torch::kFloat ? 1e-6 : std::ldexp(1.0, -8);
      const auto f32 = cuda_float();
      auto x = randn_in(3, 2 * 192, t, /*channels_last=*/true, f32.dtype(dtype)).requires_grad_(true);
      auto bias = (torch::randn({2 * 192}, f32) * 0.5).requires_grad_(true);
      auto grad = randn_in(3, 192, t, true, f32.dtype(dtype));
      std::vector<torch::Tensor> bias_grads;
      for (int run = 0; run < 2; ++run) {
        torch::manual_seed(9);  // the same dropout mask both times
        x.mutable_grad() = torch::Tensor();
        bias.mutable_grad() = torch::Tensor();
        gated_activation(x, bias, /*dropout_p=*/0.2, /*training=*/true).backward(grad);
        bias_grads.push_back(bias.grad().clone());
      }
      EXPECT_EQ(bias_grads[0].scalar_type(), torch::kFloat);
      const auto [want, abs_sum] = channel_sums(x.grad());
      const auto error = (bias_grads[0].cpu().to(torch::kDouble) - want).abs();
      EXPECT_TRUE((error <= rounding * abs_sum + 1e-6).all().item<bool>()) << (error / abs_sum).max().item<double>();
      EXPECT_TRUE(torch::equal(bias_grads[0], bias_grads[1]));

      // The residual and skip update: its bias's gradient is the column sums of res_skip's.
      auto xs = randn_in(3, 192, t, true, f32), skip = randn_in(3, 192, t, true, f32);
      auto res_skip = randn_in(3, 2 * 192, t, true, f32.dtype(dtype)).requires_grad_(true);
      auto rs_bias = torch::randn({2 * 192}, f32).requires_grad_(true);
      std::vector<int64_t> lengths{t, t / 2 + 1, t};
      const auto mask = mask_of(lengths, t, torch::kCUDA);
      auto out = residual_skip(xs, skip, res_skip, rs_bias, mask);
      torch::autograd::backward({out.x, out.skip}, {randn_in(3, 192, t, true, f32), randn_in(3, 192, t, true, f32)});
      const auto [rs_want, rs_abs] = channel_sums(res_skip.grad());
      const auto rs_error = (rs_bias.grad().cpu().to(torch::kDouble) - rs_want).abs();
      EXPECT_TRUE((rs_error <= rounding * rs_abs + 1e-6).all().item<bool>())
          << (rs_error / rs_abs).max().item<double>();
      EXPECT_GT(rs_abs.min().item<double>(), 0.0);
    }
  }
}

TEST_F(WnFusedCuda, TimeRowsKeepChannelsLastThroughConvolutionAndTheFusedOps) {
  at::globalContext().setAllowTF32CuDNN(false);
  torch::manual_seed(5);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  auto weight = torch::randn({12, 8, 5}, f32), bias = torch::randn({12}, f32);
  auto x = torch::randn({3, 8, 40}, f32);
  auto rows = to_time_rows(x);
  ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{3, 8, 1, 40}));
  EXPECT_TRUE(rows.is_contiguous(torch::MemoryFormat::ChannelsLast));

  auto expected = torch::conv1d(x, weight, bias, 1, 4, 2);
  auto y = conv_over_time(rows, weight, bias, /*padding=*/4, /*dilation=*/2);
  EXPECT_TRUE(y.is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_LE(max_abs_diff(y.squeeze(2), expected), 1e-4);
  EXPECT_LE(max_abs_diff(conv_over_time(x, weight, bias, 4, 2), expected), 1e-4);
  // 1x1: a matrix product on the rows, with and without a bias.
  auto w1 = torch::randn({12, 8, 1}, f32);
  auto y1 = conv_over_time(rows, w1, bias);
  EXPECT_TRUE(y1.is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_LE(max_abs_diff(y1.squeeze(2), torch::conv1d(x, w1, bias)), 1e-4);
  EXPECT_LE(max_abs_diff(conv_over_time(rows, w1, {}).squeeze(2), torch::conv1d(x, w1)), 1e-4);
  {  // ... whose gradients (the bias's as a matrix-vector product) are conv1d's, in float32 and
     // under bf16 autocast (each gradient in its input's dtype).
    for (const bool bf16 : {false, true}) {
      auto xa = x.clone().requires_grad_(true), wa = w1.clone().requires_grad_(true),
           ba = bias.clone().requires_grad_(true);
      auto xb = x.clone().requires_grad_(true), wb = w1.clone().requires_grad_(true),
           bb = bias.clone().requires_grad_(true);
      const auto upstream = torch::randn({3, 12, 40}, f32);
      torch::Tensor fused, ref;
      {
        const Bf16Autocast autocast(bf16, torch::kCUDA);
        fused = conv_over_time(to_time_rows(xa), wa, ba).squeeze(2);
        ref = torch::conv1d(xb, wb, bb);
      }
      EXPECT_EQ(fused.scalar_type(), bf16 ? torch::kBFloat16 : torch::kFloat);
      (fused.to(torch::kFloat) * upstream).sum().backward();
      (ref.to(torch::kFloat) * upstream).sum().backward();
      const double tol = bf16 ? 2e-2 : 1e-4;
      EXPECT_LE(max_abs_diff(fused.to(torch::kFloat), ref.to(torch::kFloat)), tol * scale_of(ref.to(torch::kFloat)));
      for (auto [a, b] : {std::pair{xa, xb}, std::pair{wa, wb}, std::pair{ba, bb}}) {
        ASSERT_TRUE(a.grad().defined());
        EXPECT_EQ(a.grad().scalar_type(), torch::kFloat);
        EXPECT_LE(max_abs_diff(a.grad(), b.grad()), tol * scale_of(b.grad())) << (bf16 ? "bf16" : "fp32");
      }
    }
  }

  // The fused ops take [B, C, 1, T] and keep ChannelsLast.
  auto acts = gated_activation(y, bias);
  EXPECT_TRUE(acts.is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_LE(max_abs_diff(acts.squeeze(2), gated_activation_reference(expected, bias)), 1e-5);
  auto mask = mask_of({40, 20, 33}, 40, torch::kCUDA);
  auto x6 = to_time_rows(torch::randn({3, 6, 40}, f32));
  const auto rows_out = residual_skip(x6, x6 * 2, y, bias, mask.unsqueeze(2));
  const torch::Tensor &x_out = rows_out.x, &skip_out = rows_out.skip;
  EXPECT_TRUE(x_out.is_contiguous(torch::MemoryFormat::ChannelsLast));
  auto [x_ref, skip_ref] = residual_skip_reference(x6.squeeze(2), x6.squeeze(2) * 2, y.squeeze(2), bias, mask);
  EXPECT_LE(max_abs_diff(x_out.squeeze(2), x_ref), 1e-6);
  EXPECT_LE(max_abs_diff(skip_out.squeeze(2), skip_ref), 1e-6);
  at::globalContext().setAllowTF32CuDNN(true);
}

// The coupling block, whose WN runs the fused kernels on [B, C, 1, T] ChannelsLast tensors on a
// GPU (and, with speaker conditioning, the composite gate): same z, logdet and gradients as on
// the CPU, and the reverse pass inverts the forward.
TEST_F(WnFusedCuda, CouplingBlockMatchesTheCpuWithAndWithoutSpeakers) {
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  for (int64_t gin : {0, 4}) {
    SCOPED_TRACE("gin_channels " + std::to_string(gin));
    torch::manual_seed(7);
    CouplingBlock block(8, 16, 5, 1, 3, gin);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : block->named_parameters()) {
        if (p.key().rfind("end.", 0) == 0) p.value().normal_(0.0, 0.1);  // zero-initialised: make it matter
      }
    }
    auto x = torch::randn({2, 8, 30});
    auto mask = mask_of({30, 21}, 30, torch::kCPU);
    x = x * mask;
    auto g = gin ? torch::randn({2, gin, 1}) : torch::Tensor();
    auto w = torch::randn({2, 8, 30});

    auto run = [&](torch::Device device) {
      block->to(device);
      block->zero_grad();
      auto xd = x.to(device).detach().requires_grad_(true);
      auto [z, logdet] = block->forward(xd, mask.to(device), gin ? g.to(device) : g);
      ((z * w.to(device)).sum() + logdet.sum()).backward();
      return std::make_tuple(z.detach().cpu(), logdet.detach().cpu(), xd.grad().cpu());
    };
    auto [z_cpu, logdet_cpu, gx_cpu] = run(torch::kCPU);
    auto [z_gpu, logdet_gpu, gx_gpu] = run(torch::kCUDA);
    EXPECT_LE(max_abs_diff(z_gpu, z_cpu), 1e-4);
    EXPECT_LE(max_abs_diff(logdet_gpu, logdet_cpu), 1e-4);
    EXPECT_LE(max_abs_diff(gx_gpu, gx_cpu), 1e-4);
    EXPECT_GT((z_cpu - x).abs().max().item<double>(), 1e-3);  // the coupling did transform x

    torch::NoGradGuard no_grad;
    auto back = block->forward(z_gpu.to(torch::kCUDA), mask.to(torch::kCUDA), gin ? g.to(torch::kCUDA) : g, true).first;
    EXPECT_LE(max_abs_diff(back, x), 1e-4);
  }
  at::globalContext().setAllowTF32CuDNN(true);
  at::globalContext().setAllowTF32CuBLAS(true);
}

}  // namespace
}  // namespace monoflow::models
