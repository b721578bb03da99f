// The CPU Winograd convolution (models/winograd_conv1d.h) against torch's conv1d, its gated
// form against the WN gate, and the WN layer's CPU inference path (modules.h) against the
// training path. Tolerance: 1e-5 of the output's largest magnitude. float32 rounds each of
// the 8 transformed values and the 4 interpolated outputs; the transforms' entries reach 10
// (BT) and 8 (AT), so their rounding grows to ~100 float32 epsilons (1.2e-5) in the worst
// case and ~20 in practice: measured 2.3e-6 at the decoder's shape (192 -> 384 channels, 900
// frames), against 1.0e-6 for torch's own float32 convolution (both against float64).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "models/modules.h"
#include "models/winograd_conv1d.h"
#include "models/wn_fused.h"

namespace monoflow::models {
namespace {

constexpr double kTolerance = 1e-5;

double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  const auto w = want.to(torch::kDouble);
  return (got.to(torch::kDouble) - w).abs().max().item<double>() / w.abs().max().item<double>();
}

struct SimdOff {
  SimdOff() { set_cpu_winograd_simd(false); }
  ~SimdOff() { set_cpu_winograd_simd(true); }
};

void check_conv(int64_t batch, int64_t c_in, int64_t c_out, int64_t t) {
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({batch, c_in, t});
  const auto w = torch::randn({c_out, c_in, 5}) / std::sqrt(5.0 * c_in);
  const auto bias = torch::randn({c_out}) * 0.1;
  const auto want = torch::conv1d(x.to(torch::kDouble), w.to(torch::kDouble), bias.to(torch::kDouble), 1, 2);
  const auto u = winograd_weight(w);
  const auto got = winograd_conv1d(x, u, bias);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LT(relative_error(got, want), kTolerance) << "B " << batch << " T " << t;
  const auto gated = winograd_conv1d_gated(x, u, bias);
  const auto gated_want = gated_activation_reference(want).to(torch::kFloat);
  ASSERT_EQ(gated.sizes(), gated_want.sizes());
  EXPECT_LT((gated - gated_want).abs().max().item<double>(), kTolerance) << "B " << batch << " T " << t;
}

TEST(WinogradConv1d, MatchesConv1dAtEveryTileRemainder) {
  torch::manual_seed(1);
  // T below one tile, at tile and lane-block edges, and the decoder's shape.
  for (int64_t t : {1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 37}) check_conv(2, 24, 48, t);
  check_conv(1, 192, 384, 900);
  check_conv(3, 16, 36, 901);
}

// Results must not depend on the core count: the parallel loops split tiles and row blocks,
// never a sum, so 1, 2, 3 and 7 intra-op threads give the same bits (a sum split over threads
// would differ in the last bits between these counts).
TEST(WinogradConv1d, ResultsAreTheSameBitsWhateverTheThreadCount) {
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 192, 901});
  const auto w = torch::randn({384, 192, 5}) / std::sqrt(5.0 * 192);
  const auto bias = torch::randn({384}) * 0.1;
  const auto u = winograd_weight(w);
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const auto one = winograd_conv1d(x, u, bias);
  const auto one_gated = winograd_conv1d_gated(x, u, bias);
  for (const int n : {2, 3, 7}) {
    torch::set_num_threads(n);
    EXPECT_TRUE(torch::equal(winograd_conv1d(x, u, bias), one)) << n << " threads";
    EXPECT_TRUE(torch::equal(winograd_conv1d_gated(x, u, bias), one_gated)) << n << " threads";
  }
  // The fused WN layer (gate and res_skip in blocks of 32 frames), residual and skip.
  const auto w_rs = winograd_rows_weight(torch::randn({384, 192}) / std::sqrt(192.0));
  const auto b_rs = torch::randn({384}) * 0.1;
  const auto skip0 = torch::randn({2, 192, 901});
  const auto layer = [&](torch::Tensor& residual, torch::Tensor& skip) {
    residual = x.clone();
    skip = skip0.clone();
    winograd_wn_layer(residual, u, bias, w_rs, b_rs, residual, skip);
  };
  torch::Tensor one_residual, one_skip;
  torch::set_num_threads(1);
  layer(one_residual, one_skip);
  for (const int n : {2, 3, 7}) {
    torch::set_num_threads(n);
    torch::Tensor residual, skip;
    layer(residual, skip);
    EXPECT_TRUE(torch::equal(residual, one_residual)) << n << " threads";
    EXPECT_TRUE(torch::equal(skip, one_skip)) << n << " threads";
  }
  torch::set_num_threads(threads);
}

TEST(WinogradConv1d, PortableLoopsMatchConv1d) {
  torch::manual_seed(2);
  const SimdOff simd_off;
  for (int64_t t : {1, 5, 33, 100}) check_conv(2, 24, 48, t);
}

// winograd_wn_layer against the WN layer's step in float64: the residual x + W_res acts +
// b_res and the skip s + W_skip acts + b_skip (or the skip alone, for the last layer's rows).
void check_wn_layer(int64_t batch, int64_t h, int64_t t, bool last) {
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({batch, h, t});
  const auto w = torch::randn({2 * h, h, 5}) / std::sqrt(5.0 * h);
  const auto bias = torch::randn({2 * h}) * 0.1;
  const int64_t rows = last ? h : 2 * h;
  const auto w_rs = torch::randn({rows, h}) / std::sqrt(1.0 * h);
  const auto b_rs = torch::randn({rows}) * 0.1;
  const auto skip0 = torch::randn({batch, h, t});
  const auto conv = torch::conv1d(x.to(torch::kDouble), w.to(torch::kDouble), bias.to(torch::kDouble), 1, 2);
  const auto r = torch::matmul(w_rs.to(torch::kDouble), gated_activation_reference(conv)) +
                 b_rs.to(torch::kDouble).view({rows, 1});
  const auto skip_want = skip0.to(torch::kDouble) + (last ? r : r.slice(1, h, 2 * h));
  auto residual = x.clone(), skip = skip0.clone();
  winograd_wn_layer(residual, winograd_weight(w), bias, winograd_rows_weight(w_rs), b_rs,
                    last ? torch::Tensor() : residual, skip);
  EXPECT_LT(relative_error(skip, skip_want), kTolerance) << "B " << batch << " T " << t << " last " << last;
  if (last) {
    EXPECT_TRUE(torch::equal(residual, x)) << "the last layer has no residual rows";
  } else {
    const auto res_want = x.to(torch::kDouble) + r.slice(1, 0, h);
    EXPECT_LT(relative_error(residual, res_want), kTolerance) << "B " << batch << " T " << t;
  }
}

// T below one block of 32 frames, at its edges and at two, and the decoder's shape.
TEST(WinogradConv1d, WnLayerMatchesGateAndResSkipInFloat64) {
  torch::manual_seed(6);
  for (bool last : {false, true}) {
    for (int64_t t : {1, 4, 31, 32, 33, 64, 65, 100}) check_wn_layer(2, 12, t, last);
    check_wn_layer(1, 192, 900, last);
  }
}

TEST(WinogradConv1d, WnLayerPortableLoopsMatchFloat64) {
  torch::manual_seed(7);
  const SimdOff simd_off;
  for (bool last : {false, true}) {
    for (int64_t t : {1, 33, 100}) check_wn_layer(2, 12, t, last);
  }
}

// The 16-lane GEMM blocks sum every output in the AVX2 blocks' order, so both give the same
// bits: the convolution at odd and even counts of 16-column panels (T 900: 225 tiles padded to
// 15 panels), and the WN layer at blocks whose last panel is full, partial or absent.
TEST(WinogradConv1d, Avx512BlocksGiveTheAvx2Bits) {
  if (!cpu_winograd_avx512_active()) GTEST_SKIP() << "no AVX-512F on this CPU (or MONOFLOW_CPU_AVX512=0)";
  torch::NoGradGuard no_grad;
  torch::manual_seed(8);
  struct Avx512Off {
    Avx512Off() { set_cpu_winograd_avx512(false); }
    ~Avx512Off() { set_cpu_winograd_avx512(true); }
  };
  for (const auto& [batch, t] : std::vector<std::pair<int64_t, int64_t>>{{1, 900}, {2, 64}, {3, 37}, {1, 5}}) {
    const int64_t h = 24;
    const auto x = torch::randn({batch, h, t});
    const auto u = winograd_weight(torch::randn({2 * h, h, 5}) / std::sqrt(5.0 * h));
    const auto bias = torch::randn({2 * h}) * 0.1;
    const auto rs_w = winograd_rows_weight(torch::randn({2 * h, h}) / std::sqrt(1.0 * h));
    const auto rs_b = torch::randn({2 * h}) * 0.1;
    const auto skip0 = torch::randn({batch, h, t});
    auto layer = [&](torch::Tensor& residual, torch::Tensor& skip) {
      residual = x.clone();
      skip = skip0.clone();
      winograd_wn_layer(residual, u, bias, rs_w, rs_b, residual, skip);
    };
    const auto conv = winograd_conv1d(x, u, bias);
    torch::Tensor residual, skip, residual_avx2, skip_avx2, conv_avx2;
    layer(residual, skip);
    {
      const Avx512Off off;
      ASSERT_FALSE(cpu_winograd_avx512_active());
      conv_avx2 = winograd_conv1d(x, u, bias);
      layer(residual_avx2, skip_avx2);
    }
    EXPECT_TRUE(torch::equal(conv, conv_avx2)) << "B " << batch << " T " << t;
    EXPECT_TRUE(torch::equal(residual, residual_avx2)) << "B " << batch << " T " << t;
    EXPECT_TRUE(torch::equal(skip, skip_avx2)) << "B " << batch << " T " << t;
    EXPECT_FALSE(torch::equal(skip, skip0)) << "the layer added nothing";
  }
}

TEST(WinogradConv1d, RowsWeightPacksSixRowsAtATime) {
  const auto w = torch::arange(12 * 2, torch::kFloat).view({12, 2});
  const auto p = winograd_rows_weight(w);
  ASSERT_EQ(p.sizes(), (std::vector<int64_t>{2, 2, 6}));
  EXPECT_EQ(p[1][0][2].item<float>(), w[8][0].item<float>());  // block 1, column 0, row 6 + 2
  EXPECT_EQ(p[0][1][5].item<float>(), w[5][1].item<float>());
  const auto padded = winograd_rows_weight(torch::ones({10, 2}));  // rows 10 and 11: zeros
  ASSERT_EQ(padded.sizes(), (std::vector<int64_t>{2, 2, 6}));
  EXPECT_EQ(padded[1][1][3].item<float>(), 1.0f);
  EXPECT_EQ(padded[1][1][4].item<float>(), 0.0f);
  EXPECT_EQ(padded[1][0][5].item<float>(), 0.0f);
}

TEST(WinogradConv1d, WeightTransformIsExactOnAnImpulse) {
  // A unit kernel tap k shifts the input by k - 2: conv of x with it is x moved, which the
  // transforms give back to float rounding (the rows through the point at infinity: taps 0, 4).
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const auto x = torch::randn({1, 1, 12});
  for (int k = 0; k < 5; ++k) {
    auto w = torch::zeros({6, 1, 5});
    w.select(2, k).fill_(1.0f);
    const auto got = winograd_conv1d(x, winograd_weight(w), {});
    const auto want = torch::conv1d(x, w, {}, 1, 2);
    EXPECT_LT(relative_error(got, want), kTolerance) << "tap " << k;
  }
}

TEST(WinogradConv1d, AppliesOnlyToCpuFloatKernelFiveInference) {
  const auto x = torch::randn({1, 4, 10});
  const auto w = torch::randn({12, 4, 5});
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(winograd_applies(x, w, 2, 1));
    EXPECT_FALSE(winograd_applies(x, w, 4, 2));                               // dilation 2
    EXPECT_FALSE(winograd_applies(x, torch::randn({8, 4, 3}), 1, 1));         // kernel 3
    EXPECT_FALSE(winograd_applies(x, torch::randn({10, 4, 5}), 2, 1));        // C_out not 6k
    EXPECT_FALSE(winograd_applies(x.to(torch::kDouble), w.to(torch::kDouble), 2, 1));
    set_cpu_winograd(false);
    EXPECT_FALSE(winograd_applies(x, w, 2, 1));
    set_cpu_winograd(true);
  }
  EXPECT_FALSE(winograd_applies(x, w, 2, 1));  // grad mode on: autograd needs torch's op
}

// The WN layer under no_grad (cached weights, Winograd, in-place sums) against the same layer
// with grad mode on (torch's convolutions, the composite ops): with and without padding and
// speaker conditioning, Winograd on and off.
void check_wn(int64_t gin, const std::vector<int64_t>& lengths, bool winograd) {
  torch::manual_seed(3);
  const int64_t h = 24, t = 45, batch = static_cast<int64_t>(lengths.size());
  WN wn(h, 5, 1, 4, gin, 0.05);
  wn->eval();
  for (auto& p : wn->parameters()) {
    torch::NoGradGuard no_grad;
    p.add_(torch::randn_like(p) * 0.1);  // res_skip and biases away from their initial values
  }
  auto mask = (torch::arange(t).unsqueeze(0) < torch::tensor(lengths).unsqueeze(1)).to(torch::kFloat).unsqueeze(1);
  const auto x = torch::randn({batch, h, t}) * mask;
  const auto g = gin ? torch::randn({batch, gin, 1}) : torch::Tensor();
  const auto want = wn->forward(x, mask, g).detach();  // grad mode on: the training path
  set_cpu_winograd(winograd);
  torch::Tensor got;
  {
    torch::NoGradGuard no_grad;
    got = wn->forward(x, mask, g);
    got = wn->forward(x, mask, g);  // again, from the cached weights
  }
  set_cpu_winograd(true);
  EXPECT_LT(relative_error(got, want), winograd ? kTolerance : 1e-6) << "gin " << gin << " winograd " << winograd;
  EXPECT_TRUE(torch::equal(got * (1 - mask), torch::zeros_like(got)));  // padding stays zero
}

TEST(WinogradConv1d, WnInferencePathMatchesTrainingPath) {
  for (bool winograd : {true, false}) {
    check_wn(0, {45}, winograd);
    check_wn(0, {45, 30, 7}, winograd);
    check_wn(8, {45, 20}, winograd);
  }
}

// WN with a 1x1 projection (the coupling's end) folded into its skip weights under no_grad,
// against the training path's WN then conv1d: P = 10 outputs (padded rows), with and without
// padding; then again after the projection and a res_skip weight change in place (the folded
// weights, kept under cache_inference_weights, follow).
TEST(WinogradConv1d, ProjectedWnMatchesWnThenConv1d) {
  torch::manual_seed(8);
  const int64_t h = 24, t = 45, p = 10;
  WN wn(h, 5, 1, 4, 0, 0.0);
  wn->eval();
  cache_inference_weights(*wn);
  for (auto& param : wn->parameters()) {
    torch::NoGradGuard no_grad;
    param.add_(torch::randn_like(param) * 0.1);
  }
  auto proj = torch::randn({p, h, 1}) / std::sqrt(1.0 * h);
  const auto proj_bias = torch::randn({p}) * 0.1;
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{45}, std::vector<int64_t>{45, 30, 7}}) {
    const int64_t batch = static_cast<int64_t>(lengths.size());
    auto mask = (torch::arange(t).unsqueeze(0) < torch::tensor(lengths).unsqueeze(1)).to(torch::kFloat).unsqueeze(1);
    const auto x = torch::randn({batch, h, t}) * mask;
    for (int round = 0; round < 2; ++round) {
      const auto want = torch::conv1d(wn->forward(x, mask), proj, proj_bias).detach();
      torch::Tensor got;
      {
        torch::NoGradGuard no_grad;
        got = wn->forward_projected(x, mask, {}, proj, proj_bias);
        got = wn->forward_projected(x, mask, {}, proj, proj_bias);  // from the cached weights
        if (round == 0) {
          proj.mul_(-0.5);
          for (auto& param : wn->named_parameters()) {
            if (param.key() == "res_skip_layers.1.weight_g") param.value().mul_(2.0);
          }
        }
      }
      EXPECT_LT(relative_error(got, want), kTolerance) << "B " << batch << " round " << round;
    }
  }
}

TEST(WinogradConv1d, CachedInferenceWeightFollowsTheParameters) {
  WeightNormConv1d conv(4, 8, 5, 1, 2);
  cache_inference_weights(*conv);
  const auto x = torch::randn({1, 4, 20});
  torch::NoGradGuard no_grad;
  const auto before = conv->forward(x);
  EXPECT_TRUE(conv->inference_weight().defined());
  conv->weight_g.mul_(2.0);  // what an optimizer step or load_state_dict does: a new version
  const auto after = conv->forward(x);
  const auto bias = conv->bias.view({1, -1, 1});
  EXPECT_LT((after - bias - 2 * (before - bias)).abs().max().item<double>(), 1e-5);
  {
    torch::AutoGradMode grad(true);
    EXPECT_FALSE(conv->inference_weight().defined());  // training computes it each forward
  }
}

// Without cache_inference_weights (training's validation), inference sees an update that leaves
// the parameter's version counter as it was: FusedAdam's parameters are views of its flat
// buffer (set_data), which its step updates, as a CUDA graph replay updates any parameter.
TEST(WinogradConv1d, InferenceWeightFollowsAnUpdateItsVersionDoesNotShow) {
  WeightNormConv1d conv(4, 8, 5, 1, 2);
  const auto x = torch::randn({1, 4, 20});
  torch::NoGradGuard no_grad;
  const auto flat = conv->weight_g.detach().flatten().clone();
  conv->weight_g.set_data(flat.view_as(conv->weight_g));
  const auto before = conv->forward(x);
  const auto version = conv->weight_g._version();
  flat.mul_(2.0);
  ASSERT_EQ(conv->weight_g._version(), version);  // what the caches were keyed on
  const auto after = conv->forward(x);
  const auto bias = conv->bias.view({1, -1, 1});
  EXPECT_LT((after - bias - 2 * (before - bias)).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace monoflow::models
