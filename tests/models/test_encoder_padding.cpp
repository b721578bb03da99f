// The text side's modules against the official op order with other values in the padded frames.
// The official masks every convolution's input and each encoder layer's input; monoflow masks
// norms' outputs instead (their columns are independent) and folds masks into epilogues. At
// every unmasked frame the outputs must agree, and so must every parameter's gradient and the
// input's, on the CPU and, where there is one, on the GPU (its fused kernels: the norms with
// their residual and mask, the convolutions' epilogues, the relative attention).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "models/attentions.h"
#include "models/encoder.h"
#include "models/modules.h"
#include "model_test_util.h"

namespace monoflow::models {
namespace {

using testing::devices;

// [B, 1, T] zeros and ones: items of T, 7 and 1 frames.
torch::Tensor padding_mask(int64_t t, const torch::Device& device) {
  const auto lengths = torch::tensor({t, int64_t{7}, int64_t{1}}).view({3, 1, 1});
  return (torch::arange(t).view({1, 1, t}) < lengths).to(torch::kFloat).to(device);
}

std::map<std::string, torch::Tensor> parameters_of(const torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : module.named_parameters()) out[item.key()] = item.value();
  return out;
}

torch::Tensor conv(const torch::Tensor& x, const std::map<std::string, torch::Tensor>& p, const std::string& name) {
  const auto& w = p.at(name + ".weight");
  return torch::conv1d(x, w, p.at(name + ".bias"), 1, w.size(2) / 2);
}

// Runs `ours` and `official` on the same input (values everywhere, padded frames included) and
// compares the outputs and the gradients of the input and of every parameter for one random
// output gradient.
template <typename Ours, typename Official>
void expect_same_values_and_gradients(torch::nn::Module& module, const torch::Tensor& x_in, const Ours& ours,
                                      const Official& official) {
  auto x = x_in.detach().clone().requires_grad_(true);
  auto x_ref = x_in.detach().clone().requires_grad_(true);
  const torch::Tensor y = ours(x);
  const torch::Tensor y_ref = official(x_ref);
  ASSERT_EQ(y.sizes(), y_ref.sizes());
  const double scale = std::max(1.0, y_ref.abs().max().item<double>());
  EXPECT_LT((y - y_ref).abs().max().item<double>(), 1e-5 * scale);
  const auto g = torch::randn_like(y);
  std::vector<torch::Tensor> inputs{x}, inputs_ref{x_ref};
  std::vector<std::string> names{"input"};
  for (const auto& item : module.named_parameters()) {
    inputs.push_back(item.value());
    inputs_ref.push_back(item.value());
    names.push_back(item.key());
  }
  const auto grads = torch::autograd::grad({y}, inputs, {g}, {}, false, /*allow_unused=*/true);
  const auto grads_ref = torch::autograd::grad({y_ref}, inputs_ref, {g}, {}, false, true);
  for (size_t i = 0; i < grads.size(); ++i) {
    SCOPED_TRACE(names[i]);
    ASSERT_EQ(grads[i].defined(), grads_ref[i].defined());
    if (!grads[i].defined()) continue;
    const double s = std::max(1.0, grads_ref[i].abs().max().item<double>());
    EXPECT_LT((grads[i] - grads_ref[i]).abs().max().item<double>(), 1e-4 * s);
  }
  // the gradients compared are not all zeros
  EXPECT_GT(grads_ref[0].abs().max().item<double>(), 0.0);
}

TEST(EncoderPadding, AttentionEncoderEqualsTheOfficialOrderWithGradients) {
  for (const auto& device : devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(11);
    const int64_t hidden = 16, filter = 32, heads = 2, layers = 2, kernel = 3, window = 4, t = 11;
    AttentionEncoder encoder(hidden, filter, heads, layers, kernel, /*p_dropout=*/0.0, window);
    encoder->to(device);
    const auto mask = padding_mask(t, device);
    const auto modules = encoder->named_modules("", /*include_self=*/false);
    const auto p = parameters_of(*encoder);
    const auto official = [&](torch::Tensor x) {
      const auto attn_mask = mask.unsqueeze(2) * mask.unsqueeze(-1);
      for (int64_t i = 0; i < layers; ++i) {
        const auto n = std::to_string(i);
        x = x * mask;
        auto y = modules["attn_layers." + n]->as<MultiHeadAttention>()->forward(x, x, attn_mask);
        x = modules["norm_layers_1." + n]->as<LayerNorm>()->forward(x + y);
        y = torch::relu(conv(x * mask, p, "ffn_layers." + n + ".conv_1"));
        y = conv(y * mask, p, "ffn_layers." + n + ".conv_2") * mask;
        x = modules["norm_layers_2." + n]->as<LayerNorm>()->forward(x + y);
      }
      return x * mask;
    };
    const auto x = torch::randn({3, hidden, t}).to(device) * 2;
    expect_same_values_and_gradients(*encoder, x, [&](const torch::Tensor& v) { return encoder->forward(v, mask); },
                                     official);
  }
}

TEST(EncoderPadding, DurationPredictorEqualsTheOfficialOrderWithGradients) {
  for (const auto& device : devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(12);
    const int64_t t = 11;
    DurationPredictor predictor(16, 24, 3, /*p_dropout=*/0.0);
    predictor->to(device);
    const auto mask = padding_mask(t, device);
    const auto modules = predictor->named_modules("", /*include_self=*/false);
    const auto p = parameters_of(*predictor);
    const auto official = [&](const torch::Tensor& x_in) {
      auto x = torch::relu(conv(x_in * mask, p, "conv_1"));
      x = modules["norm_1"]->as<LayerNorm>()->forward(x);
      x = torch::relu(conv(x * mask, p, "conv_2"));
      x = modules["norm_2"]->as<LayerNorm>()->forward(x);
      return conv(x * mask, p, "proj") * mask;
    };
    const auto x = torch::randn({3, 16, t}).to(device);
    expect_same_values_and_gradients(*predictor, x, [&](const torch::Tensor& v) { return predictor->forward(v, mask); },
                                     official);
  }
}

TEST(EncoderPadding, PrenetEqualsTheOfficialOrderWithGradients) {
  for (const auto& device : devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(13);
    const int64_t channels = 16, layers = 3, t = 11;
    ConvReluNorm prenet(channels, channels, channels, /*kernel_size=*/5, layers, /*p_dropout=*/0.0);
    prenet->to(device);
    const auto p = parameters_of(*prenet);
    {
      // The projection starts at zero, which would pass no gradient to the layers.
      torch::NoGradGuard no_grad;
      p.at("proj.weight").uniform_(-0.3, 0.3);
    }
    const auto mask = padding_mask(t, device);
    const auto modules = prenet->named_modules("", /*include_self=*/false);
    const auto official = [&](const torch::Tensor& x_org) {
      auto x = x_org;
      for (int64_t i = 0; i < layers; ++i) {
        const auto n = std::to_string(i);
        x = conv(x * mask, p, "conv_layers." + n);
        x = torch::relu(modules["norm_layers." + n]->as<LayerNorm>()->forward(x));
      }
      return (x_org + conv(x, p, "proj")) * mask;
    };
    const auto x = torch::randn({3, channels, t}).to(device);
    expect_same_values_and_gradients(*prenet, x, [&](const torch::Tensor& v) { return prenet->forward(v, mask); },
                                     official);
  }
}

}  // namespace
}  // namespace monoflow::models
