// The text side's ops against the original's composites: LayerNorm over channels (biased
// variance, eps inside the root) and a convolution whose bias is its own autograd node. Values
// and gradients, on the CPU and, where there is one, on the GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/channel_norm_cpu.h"
#include "models/conv_bias.h"
#include "models/modules.h"
#include "model_test_util.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/bias_act_cuda.h"
#include "models/channel_norm_cuda.h"
#endif

namespace monoflow::models {
namespace {

using testing::devices;

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

// The original Glow-TTS LayerNorm, written out as its composite of means.
torch::Tensor layer_norm_composite(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                   double eps) {
  auto mean = x.mean(1, /*keepdim=*/true);
  auto variance = (x - mean).pow(2).mean(1, /*keepdim=*/true);
  return (x - mean) * torch::rsqrt(variance + eps) * gamma.view({1, -1, 1}) + beta.view({1, -1, 1});
}

// A norm on `device` with gamma and beta drawn away from their 1 and 0, so that both count.
LayerNorm norm_with_random_affine(int64_t channels, const torch::Device& device) {
  LayerNorm norm(channels);
  norm->to(device);
  torch::NoGradGuard no_grad;
  norm->gamma.uniform_(0.5, 1.5);
  norm->beta.uniform_(-0.5, 0.5);
  return norm;
}

// On the CPU the shapes cover one partial tile of frames and two whole ones with a partial third
// (channel_norm_cpu.cpp's tiles are 64 frames); on the GPU a partial tile of time columns
// (33 = 32 + 1) and the encoder's own shape (B = 32, 192 channels, 184 tokens).
TEST(EncoderOps, LayerNormEqualsTheOriginalsCompositeWithGradients) {
  for (const auto& device : devices()) {
    std::vector<std::vector<int64_t>> shapes{{3, 24, 17}};
    if (device.is_cpu()) shapes.push_back({2, 20, 130});
    if (device.is_cuda()) shapes.insert(shapes.end(), {{2, 20, 33}, {32, 192, 184}});
    for (const auto& shape : shapes) {
      SCOPED_TRACE(torch::IntArrayRef(shape));
      const int64_t channels = shape[1];
      torch::manual_seed(3);
      LayerNorm norm = norm_with_random_affine(channels, device);
      auto x = (torch::randn(shape) * 3 + 1).to(device).requires_grad_(true);
      auto x_ref = x.detach().clone().requires_grad_(true);
      auto g = torch::randn(shape).to(device);
      auto y = norm->forward(x);
      auto y_ref = layer_norm_composite(x_ref, norm->gamma, norm->beta, 1e-4);
      EXPECT_TRUE(y.is_contiguous());
      EXPECT_LT(max_abs_diff(y, y_ref), 1e-5) << device;
      auto grads = torch::autograd::grad({y}, {x, norm->gamma, norm->beta}, {g});
      auto grads_ref = torch::autograd::grad({y_ref}, {x_ref, norm->gamma, norm->beta}, {g});
      for (size_t i = 0; i < grads.size(); ++i) {
        // gamma's and beta's gradients sum B * T values: relative to their size.
        const double scale = std::max(1.0, grads_ref[i].abs().max().item<double>());
        EXPECT_LT(max_abs_diff(grads[i], grads_ref[i]), 1e-4 * scale) << device << " gradient " << i;
      }
      // over channels: with gamma 1 and beta 0 each (batch, time) column has mean 0, variance ~1
      LayerNorm plain(channels);
      plain->to(device);
      auto z = plain->forward(x.detach());
      EXPECT_LT(z.mean(1).abs().max().item<double>(), 1e-5);
      EXPECT_LT((z.pow(2).mean(1) - 1).abs().max().item<double>(), 1e-3);
    }
  }
}

// The CPU's one-pass norm (channel_norm_cpu.h) takes float32 and gives the same bits for any
// thread count (each tile's sums its own, gamma's and beta's added tile by tile in order); other
// dtypes take the composite, which still matches the original's.
TEST(EncoderOps, CpuLayerNormIsTheSameForAnyThreadCountAndOtherDtypesFallBack) {
  const int64_t b = 3, c = 40, t = 150;
  torch::manual_seed(5);
  LayerNorm norm = norm_with_random_affine(c, torch::kCPU);
  const auto x = (torch::randn({b, c, t}) * 2 - 1).requires_grad_(true);
  const auto r = torch::randn({b, c, t}).requires_grad_(true);
  const auto g = torch::randn({b, c, t});
  const auto mask = (torch::arange(t).view({1, 1, t}) < torch::tensor({t, int64_t{70}, int64_t{9}}).view({b, 1, 1}))
                        .to(torch::kFloat);
  ASSERT_TRUE(cpu::channel_norm_cpu_applies(x, norm->gamma, norm->beta, r, mask));
  ASSERT_FALSE(cpu::channel_norm_cpu_applies(x.to(torch::kDouble), norm->gamma, norm->beta));
  ASSERT_FALSE(cpu::channel_norm_cpu_applies(x, norm->gamma, norm->beta, {}, mask.requires_grad_(false).view({b, t})));
  const int threads = at::get_num_threads();
  std::vector<std::vector<torch::Tensor>> runs;
  for (const int n : {1, 2, 3, 8}) {
    at::set_num_threads(n);
    auto y = norm->forward(x, r, mask);
    auto grads = torch::autograd::grad({y}, {x, r, norm->gamma, norm->beta}, {g});
    grads.insert(grads.begin(), y.detach());
    runs.push_back(grads);
  }
  at::set_num_threads(threads);
  for (size_t run = 1; run < runs.size(); ++run) {
    for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(torch::equal(runs[run][i], runs[0][i])) << run << " " << i;
  }
  // double takes the composite: the original's values to double's precision
  const auto xd = x.detach().to(torch::kDouble), rd = r.detach().to(torch::kDouble);
  norm->to(torch::kDouble);
  const auto yd = norm->forward(xd, rd, mask.to(torch::kDouble));
  const auto yd_ref = layer_norm_composite(xd + rd, norm->gamma, norm->beta, 1e-4) * mask.to(torch::kDouble);
  EXPECT_LT(max_abs_diff(yd, yd_ref), 1e-12);
  EXPECT_LT(max_abs_diff(runs[0][0], yd_ref), 1e-5);
}

// The encoder layer's norm with its residual sum and mask, mask * norm(x + r), against the
// official ops in that order: values and the gradients of x, r, gamma and beta on every device;
// on the GPU the one kernel also gives the bits of the plain norm of the sum times the mask. Each
// of residual and mask alone too. Lengths cover a masked partial tile and an item of one frame.
TEST(EncoderOps, LayerNormWithResidualAndMaskEqualsTheOfficialOps) {
  for (const auto& device : devices()) {
    const int64_t b = 4, c = 48, t = 37;
    torch::manual_seed(4);
    LayerNorm norm = norm_with_random_affine(c, device);
    const auto mask = (torch::arange(t).view({1, 1, t}) < torch::tensor({t, int64_t{20}, int64_t{1}, int64_t{33}}).view({b, 1, 1}))
                          .to(torch::kFloat)
                          .to(device);
    for (const bool with_residual : {false, true}) {
      for (const bool masked : {false, true}) {
        SCOPED_TRACE(std::string(with_residual ? "residual" : "no residual") + (masked ? ", mask" : ", no mask"));
        auto x = (torch::randn({b, c, t}) * 2 + 1).to(device).requires_grad_(true);
        auto r = torch::randn({b, c, t}).to(device).requires_grad_(true);
        auto g = torch::randn({b, c, t}).to(device);
        const auto residual = with_residual ? r : torch::Tensor();
        const auto m = masked ? mask : torch::Tensor();
#ifdef MONOFLOW_HAS_CUDA
        // on the GPU the one kernel, not the composite fallback, is what is compared
        if (device.is_cuda()) ASSERT_TRUE(cuda::fused_channel_norm_applies(x, norm->gamma, norm->beta, residual, m));
#endif
        auto y = norm->forward(x, residual, m);
        auto sum = with_residual ? x + r : x;
        auto y_ref = layer_norm_composite(sum, norm->gamma, norm->beta, 1e-4);
        if (masked) y_ref = y_ref * mask;
        EXPECT_LT(max_abs_diff(y, y_ref), 1e-5) << device;
        if (masked) EXPECT_EQ((y * (1 - mask)).abs().max().item<double>(), 0.0);
        if (device.is_cuda()) {
          auto plain = norm->forward(sum);
          EXPECT_TRUE(torch::equal(y, masked ? plain * mask : plain));
        }
        const std::vector<torch::Tensor> inputs{x, r, norm->gamma, norm->beta};
        auto grads = torch::autograd::grad({y}, inputs, {g}, /*retain_graph=*/{}, /*create_graph=*/false,
                                           /*allow_unused=*/true);
        auto grads_ref = torch::autograd::grad({y_ref}, inputs, {g}, {}, false, true);
        for (size_t i = 0; i < grads.size(); ++i) {
          ASSERT_EQ(grads[i].defined(), grads_ref[i].defined()) << "gradient " << i;
          if (!grads[i].defined()) continue;
          const double scale = std::max(1.0, grads_ref[i].abs().max().item<double>());
          EXPECT_LT(max_abs_diff(grads[i], grads_ref[i]), 1e-4 * scale) << device << " gradient " << i;
        }
        // masked frames pass no gradient back
        if (masked) EXPECT_EQ((grads[0] * (1 - mask)).abs().max().item<double>(), 0.0);
      }
    }
  }
}

TEST(EncoderOps, SeparateConvBiasEqualsTheModulesForwardWithGradients) {
  for (const auto& device : devices()) {
    torch::manual_seed(5);
    torch::nn::Conv1d conv(torch::nn::Conv1dOptions(16, 32, 3).padding(1));
    conv->to(device);
    auto x = torch::randn({4, 16, 21}).to(device).requires_grad_(true);
    auto g = torch::randn({4, 32, 21}).to(device);
    auto y = conv1d_forward(*conv, x);
    auto grads = torch::autograd::grad({y}, {x, conv->weight, conv->bias}, {g});
    auto y_ref = torch::conv1d(x, conv->weight, conv->bias, 1, 1);
    auto grads_ref = torch::autograd::grad({y_ref}, {x, conv->weight, conv->bias}, {g});
    EXPECT_LT(max_abs_diff(y, y_ref), 1e-5) << device;
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_LT(max_abs_diff(grads[i], grads_ref[i]), 1e-4) << device << " gradient " << i;
    }
    // the bias gradient is the sum of the output gradient over batch and time
    EXPECT_LT(max_abs_diff(grads[2], g.sum(at::IntArrayRef{0, 2})), 1e-4);
  }
}

TEST(EncoderOps, ChannelBiasAddsPerChannelAndSumsItsGradient) {
  auto y = torch::randn({2, 3, 5}, torch::requires_grad());
  auto bias = torch::tensor({1.0f, -2.0f, 0.5f}, torch::requires_grad());
  auto out = add_channel_bias(y, bias);
  EXPECT_EQ(max_abs_diff(out, y + bias.view({1, 3, 1})), 0.0);
  auto g = torch::arange(30, torch::kFloat).view({2, 3, 5});
  auto grads = torch::autograd::grad({out}, {y, bias}, {g});
  EXPECT_EQ(max_abs_diff(grads[0], g), 0.0);
  // g[b][c][t] = 15 b + 5 c + t: channel c sums to 95 + 50 c
  EXPECT_LT(max_abs_diff(grads[1], torch::tensor({95.0, 145.0, 195.0})), 1e-4);
}


// conv1d_act: the convolution, then ReLU, dropout and the mask, each case against the official
// ops in that order (without dropout, values and gradients on every device; the CPU takes the
// official ops themselves).
TEST(EncoderOps, ConvActEqualsTheOfficialOpsWithoutDropout) {
  for (const auto& device : devices()) {
    for (const bool relu : {false, true}) {
      for (const bool masked : {false, true}) {
        SCOPED_TRACE(std::string(relu ? "relu" : "no relu") + (masked ? ", mask" : ", no mask"));
        torch::manual_seed(6);
        torch::nn::Conv1d conv(torch::nn::Conv1dOptions(16, 32, 3).padding(1));
        conv->to(device);
        auto x = torch::randn({4, 16, 21}).to(device).requires_grad_(true);
        auto g = torch::randn({4, 32, 21}).to(device);
        auto mask = masked ? (torch::arange(21).view({1, 1, 21}) < torch::tensor({21, 9, 21, 1}).view({4, 1, 1}))
                                 .to(torch::kFloat)
                                 .to(device)
                           : torch::Tensor();
        auto y = conv1d_act(*conv, x, mask, relu, 0.5, /*training=*/false);
        auto grads = torch::autograd::grad({y}, {x, conv->weight, conv->bias}, {g});
        auto y_ref = torch::conv1d(x, conv->weight, conv->bias, 1, 1);
        if (relu) y_ref = torch::relu(y_ref);
        if (masked) y_ref = y_ref * mask;
        auto grads_ref = torch::autograd::grad({y_ref}, {x, conv->weight, conv->bias}, {g});
        EXPECT_LT(max_abs_diff(y, y_ref), 1e-5) << device;
        for (size_t i = 0; i < grads.size(); ++i) {
          EXPECT_LT(max_abs_diff(grads[i], grads_ref[i]), 1e-4) << device << " gradient " << i;
        }
      }
    }
  }
}

#ifdef MONOFLOW_HAS_CUDA
// The GPU's epilogue kernel with dropout: every output is 0 or the undropped value times
// 1 / keep, about keep of them survive, a reseeded generator repeats the mask, and the backward
// passes the gradient exactly where the forward kept a value (ReLU: where the output is > 0),
// the bias's gradient being its sum. Rows of odd length take the kernel's element-wise path,
// rows of a multiple of 4 its 16-byte one.
// In bf16 (the text side under autocast) the same, each value within one bf16 step of float's.
TEST(EncoderOps, BiasActCudaDropoutKeepsAndPassesTheSameElements) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const double p = 0.3;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    // bf16: half a step of values below 16 (these stay below ~8: randn / 0.7)
    const double tolerance = dtype == torch::kFloat ? 1e-5 : std::pow(2.0, -5);
    for (const int64_t t : {37, 180}) {
      for (const bool relu : {false, true}) {
        SCOPED_TRACE("T " + std::to_string(t) + (relu ? " relu " : " ") + c10::toString(dtype));
        const int64_t b = 8, c = 96;
        auto y = torch::randn({b, c, t}, torch::kCUDA).to(dtype).requires_grad_(true);
        auto bias = (torch::randn({c}, torch::kCUDA) * 0.1).requires_grad_(true);
        std::vector<int64_t> lengths{t, t / 2, 1, t, t - 3, t, 2, t};
        auto mask = (torch::arange(t).view({1, 1, t}) < torch::tensor(lengths).view({b, 1, 1})).to(torch::kFloat).cuda();
        ASSERT_TRUE(cuda::fused_bias_act_applies(y, bias, mask));
        torch::cuda::manual_seed(21);
        auto out = cuda::bias_act(y, bias, mask, relu, p);
        torch::cuda::manual_seed(21);
        EXPECT_TRUE(torch::equal(out, cuda::bias_act(y, bias, mask, relu, p)));
        const auto y32 = y.detach().to(torch::kFloat);
        auto plain = (relu ? torch::relu(y32 + bias.view({1, -1, 1})) : y32 + bias.view({1, -1, 1})) * mask;
        auto kept = (out != 0).logical_and(plain != 0);
        const auto dropped_or_zero = (out == 0);
        EXPECT_TRUE(kept.logical_or(dropped_or_zero).all().item<bool>());
        EXPECT_LT(max_abs_diff(torch::where(kept, out.to(torch::kFloat), torch::zeros_like(plain)),
                               torch::where(kept, plain / (1 - p), torch::zeros_like(plain))),
                  tolerance);
        const double share = kept.sum().item<double>() / (plain != 0).sum().item<double>();
        EXPECT_NEAR(share, 1 - p, 0.02);
        auto g = torch::randn({b, c, t}, torch::kCUDA).to(dtype);
        auto grads = torch::autograd::grad({out}, {y, bias}, {g});
        const auto g32 = g.to(torch::kFloat);
        auto expected = torch::where(kept, g32 / (1 - p), torch::zeros_like(g32));
        // Without ReLU a kept element whose value is 0 (masked out) still has no gradient, as
        // the mask's product says; where plain is 0 only through ReLU, none either.
        EXPECT_LT(max_abs_diff(grads[0], expected), tolerance);
        // The bias's gradient sums the gradient before its rounding to the dtype.
        EXPECT_EQ(grads[1].scalar_type(), torch::kFloat);
        EXPECT_LT(max_abs_diff(grads[1], expected.sum(at::IntArrayRef{0, 2})),
                  1e-4 * std::max(1.0, grads[1].abs().max().item<double>()));
      }
    }
  }
}
// The text side under bf16 autocast (models/text_side_precision.h): the norm with its residual
// and mask, and the epilogue with and without ReLU, on bf16 activations with float32 gamma,
// beta and bias. Against the float32 ops on the same (bf16-representable) values: each output
// and activation gradient that float result rounded once to bf16 (within one bf16 step, as the
// kernel's float sums may round the other way at a tie), gamma's, beta's and the bias's
// gradients (float32) to float32's precision of their sums.
double bf16_step_excess(const torch::Tensor& got, const torch::Tensor& want_float) {
  // |got - want| beyond one bf16 step (2^-7 relative, at least 2^-7 * 1e-3 absolute)
  const auto want = want_float.to(torch::kDouble);
  const auto step = want.abs().clamp_min(1e-3) * std::pow(2.0, -7);
  return ((got.to(torch::kDouble) - want).abs() - step).max().item<double>();
}

// Rows of 37 take the kernels' element-wise path, rows of 40 bias_act's 8-byte one.
TEST(EncoderOps, Bf16LayerNormAndEpilogueRoundTheFloatOpsOnce) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const int64_t t : {37, 40}) {
    SCOPED_TRACE("T " + std::to_string(t));
    const int64_t b = 4, c = 48;
    torch::manual_seed(8);
    const auto mask = (torch::arange(t).view({1, 1, t}) < torch::tensor({t, int64_t{20}, int64_t{1}, int64_t{33}}).view({b, 1, 1}))
                          .to(torch::kFloat)
                          .cuda();
    const auto bf16 = [](const torch::Tensor& x) { return x.to(torch::kBFloat16).detach().requires_grad_(true); };
    const auto as_float = [](const torch::Tensor& x) { return x.detach().to(torch::kFloat).requires_grad_(true); };
    {
      SCOPED_TRACE("layer norm");
      LayerNorm norm = norm_with_random_affine(c, torch::kCUDA);
      auto x = bf16(torch::randn({b, c, t}, torch::kCUDA) * 2 + 1), r = bf16(torch::randn({b, c, t}, torch::kCUDA));
      ASSERT_TRUE(cuda::fused_channel_norm_applies(x, norm->gamma, norm->beta, r, mask));
      auto x32 = as_float(x), r32 = as_float(r);
      const auto g = torch::randn({b, c, t}, torch::kCUDA).to(torch::kBFloat16);
      const auto y = norm->forward(x, r, mask);
      const auto y32 = layer_norm_composite(x32 + r32, norm->gamma, norm->beta, 1e-4) * mask;
      EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
      EXPECT_LE(bf16_step_excess(y, y32), 0.0);
      const std::vector<torch::Tensor> ins{x, r, norm->gamma, norm->beta}, ins32{x32, r32, norm->gamma, norm->beta};
      const auto grads = torch::autograd::grad({y}, ins, {g});
      const auto grads32 = torch::autograd::grad({y32}, ins32, {g.to(torch::kFloat)});
      EXPECT_EQ(grads[0].scalar_type(), torch::kBFloat16);
      EXPECT_LE(bf16_step_excess(grads[0], grads32[0]), 0.0);
      EXPECT_TRUE(torch::equal(grads[1], grads[0]));
      for (size_t i = 2; i < 4; ++i) {
        EXPECT_EQ(grads[i].scalar_type(), torch::kFloat);
        EXPECT_LT(max_abs_diff(grads[i], grads32[i]), 1e-4 * std::max(1.0, grads32[i].abs().max().item<double>())) << i;
      }
    }
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(relu ? "epilogue, relu" : "epilogue");
      auto y = bf16(torch::randn({b, c, t}, torch::kCUDA));
      auto bias = (torch::randn({c}, torch::kCUDA) * 0.3).requires_grad_(true);
      ASSERT_TRUE(cuda::fused_bias_act_applies(y, bias, mask));
      auto y32 = as_float(y);
      const auto g = torch::randn({b, c, t}, torch::kCUDA).to(torch::kBFloat16);
      const auto out = cuda::bias_act(y, bias, mask, relu, 0.0);
      auto out32 = y32 + bias.view({1, -1, 1});
      if (relu) out32 = torch::relu(out32);
      out32 = out32 * mask;
      EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
      EXPECT_LE(bf16_step_excess(out, out32), 0.0);
      const auto grads = torch::autograd::grad({out}, {y, bias}, {g});
      const auto grads32 = torch::autograd::grad({out32}, {y32, bias}, {g.to(torch::kFloat)});
      EXPECT_EQ(grads[0].scalar_type(), torch::kBFloat16);
      EXPECT_EQ(grads[1].scalar_type(), torch::kFloat);
      // The kernel reads which elements ReLU passed from its bf16 output (> 0); compared there.
      const auto passed = relu ? (out != 0).logical_or(mask.expand_as(out) == 0) : torch::ones_like(out, torch::kBool);
      EXPECT_LE(bf16_step_excess(grads[0].masked_select(passed), grads32[0].masked_select(passed)), 0.0);
      EXPECT_LT(max_abs_diff(grads[1], grads32[1]), 1e-4 * std::max(1.0, grads32[1].abs().max().item<double>()));
    }
  }
}
#endif  // MONOFLOW_HAS_CUDA

}  // namespace
}  // namespace monoflow::models
