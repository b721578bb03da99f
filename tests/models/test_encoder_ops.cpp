// The text side's ops against the original's composites: LayerNorm over channels (biased
// variance, eps inside the root) and a convolution whose bias is its own autograd node. Values
// and gradients, on the CPU and, where there is one, on the GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "models/conv_bias.h"
#include "models/modules.h"

namespace monoflow::models {
namespace {

std::vector<torch::Device> devices() {
  std::vector<torch::Device> out{torch::kCPU};
  if (torch::cuda::is_available()) out.emplace_back(torch::kCUDA);
  return out;
}

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

// On the GPU the shapes also cover a partial tile of time columns (33 = 32 + 1) and the encoder's
// own (B = 32, 192 channels, 184 tokens).
TEST(EncoderOps, LayerNormEqualsTheOriginalsCompositeWithGradients) {
  for (const auto& device : devices()) {
    std::vector<std::vector<int64_t>> shapes{{3, 24, 17}};
    if (device.is_cuda()) shapes.insert(shapes.end(), {{2, 20, 33}, {32, 192, 184}});
    for (const auto& shape : shapes) {
      SCOPED_TRACE(torch::IntArrayRef(shape));
      const int64_t channels = shape[1];
      torch::manual_seed(3);
      LayerNorm norm(channels);
      norm->to(device);
      {
        torch::NoGradGuard no_grad;
        norm->gamma.uniform_(0.5, 1.5);
        norm->beta.uniform_(-0.5, 0.5);
      }
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

}  // namespace
}  // namespace monoflow::models
