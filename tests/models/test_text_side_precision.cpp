// The text side's dtype (models/text_side_precision.h): float32 unless CUDA autocast is on, then
// autocast's, with float32 outputs and parameter gradients; the switch that keeps it float32.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "models/autocast.h"
#include "models/encoder.h"
#include "models/text_side_precision.h"

namespace monoflow::models {
namespace {

// The benchmarks apply a config's setting unless the environment chose one at start-up.
TEST(TextSidePrecision, KnowsWhetherTheEnvironmentChoseTheSetting) {
  const char* value = std::getenv("MONOFLOW_TEXT_SIDE_AUTOCAST");
  const std::string text = value ? value : "";
  const bool chosen = text == "1" || text == "true" || text == "on" || text == "0" || text == "false" || text == "off";
  EXPECT_EQ(text_side_autocast_set_by_environment(), chosen);
  const TextSideAutocastScope off(false);  // setting it here does not make it the environment's
  EXPECT_EQ(text_side_autocast_set_by_environment(), chosen);
}

TEST(TextSidePrecision, FollowsCudaAutocastOnlyOnAGpuAndWithTheSettingOn) {
  const TextSideAutocastScope on(true);
  const auto cpu = torch::zeros({2}, torch::kLong);
  EXPECT_EQ(text_side_dtype(cpu, torch::kFloat), torch::kFloat);
  EXPECT_EQ(text_side_dtype(cpu, torch::kDouble), torch::kDouble);
  {
    const Bf16Autocast autocast(true, torch::kCUDA);
    EXPECT_EQ(text_side_dtype(cpu, torch::kFloat), torch::kFloat);  // autocast on CUDA, input on the CPU
    if (torch::cuda::is_available()) {
      const auto gpu = cpu.cuda();
      EXPECT_EQ(text_side_dtype(gpu, torch::kFloat), torch::kBFloat16);
      at::autocast::set_autocast_dtype(at::kCUDA, at::kHalf);  // fp16 would need loss scaling: not followed
      EXPECT_EQ(text_side_dtype(gpu, torch::kFloat), torch::kFloat);
      at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
      set_text_side_autocast(false);
      EXPECT_EQ(text_side_dtype(gpu, torch::kFloat), torch::kFloat);
    }
  }
  if (torch::cuda::is_available()) EXPECT_EQ(text_side_dtype(cpu.cuda(), torch::kFloat), torch::kFloat);
}

struct EncoderRun {
  std::vector<torch::Tensor> outputs;  // x_m, x_logs, logw
  std::vector<std::string> names;
  std::vector<torch::Tensor> grads;
};

// The text encoder's forward (eval: no dropout, so that the dtypes draw nothing different) and
// the gradients of every parameter from a fixed weighting of its outputs.
EncoderRun run_encoder(TextEncoder& encoder, const torch::Tensor& tokens, const torch::Tensor& lengths, bool bf16) {
  encoder->zero_grad();
  EncoderOutput out;
  {
    const Bf16Autocast autocast(bf16, torch::kCUDA);
    out = encoder->forward(tokens, lengths);
  }
  EncoderRun run{{out.x_m, out.x_logs, out.logw}, {}, {}};
  torch::Tensor loss = torch::zeros({}, out.x_m.options());
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    const auto w = torch::linspace(-1.0, 1.0, run.outputs[i].numel(), out.x_m.options()).view_as(run.outputs[i]);
    loss = loss + (run.outputs[i] * w).sum() + run.outputs[i].pow(2).sum() * 0.1;
  }
  loss.backward();
  for (const auto& p : encoder->named_parameters()) {
    run.names.push_back(p.key());
    run.grads.push_back(p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor());
  }
  return run;
}

double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  return ((got.to(torch::kDouble) - want.to(torch::kDouble)).norm() / want.to(torch::kDouble).norm().clamp_min(1e-12))
      .item<double>();
}

// Under bf16 autocast the encoder runs in bf16 (its outputs not the float32 run's bits) and stays
// within bf16's error of the float32 run, outputs and every parameter's gradient (float32); with
// the setting off it is the float32 run, bit for bit. bf16 keeps 8 significant bits (2^-8 =
// 0.4%); the gradients pass through every layer's bf16 activations and gradients, rounded at
// each op, so the bound is a few percent of each gradient's size (on an H200: outputs up to
// 2.1%, the embedding's gradient 8%). A gradient that is zero in exact arithmetic (conv_k's bias
// moves all of a row's scores alike, which the softmax ignores) is rounding noise on both sides:
// its size counts as 1% of the largest parameter gradient's.
TEST(TextSidePrecision, TheEncoderUnderBf16AutocastStaysWithinBf16ErrorOfFloat32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const testing::ExactCuda exact;
  torch::manual_seed(9);
  const auto o = testing::tiny_options().hidden_channels(32).hidden_channels_enc(32).filter_channels(64)
                     .filter_channels_dp(32).n_heads(2);
  TextEncoder encoder(o);
  testing::randomize(*encoder, 0.2);
  encoder->to(torch::kCUDA);
  encoder->eval();
  const auto cuda_long = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kLong);
  const auto tokens = torch::randint(1, o.n_vocab(), {3, 23}, cuda_long);
  const auto lengths = torch::tensor({23, 17, 5}, cuda_long);

  const TextSideAutocastScope on(true);
  const auto reference = run_encoder(encoder, tokens, lengths, /*bf16=*/false);
  const auto bf16 = run_encoder(encoder, tokens, lengths, /*bf16=*/true);
  for (size_t i = 0; i < reference.outputs.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_EQ(bf16.outputs[i].scalar_type(), torch::kFloat);
    EXPECT_FALSE(torch::equal(bf16.outputs[i], reference.outputs[i]));
    EXPECT_LT(relative_error(bf16.outputs[i], reference.outputs[i]), 4e-2);
  }
  ASSERT_EQ(bf16.grads.size(), reference.grads.size());
  ASSERT_GT(reference.grads.size(), 30u);
  double largest = 0.0;
  for (const auto& g : reference.grads) {
    if (g.defined()) largest = std::max(largest, g.norm().item<double>());
  }
  for (size_t i = 0; i < reference.grads.size(); ++i) {
    SCOPED_TRACE(reference.names[i]);
    ASSERT_EQ(bf16.grads[i].defined(), reference.grads[i].defined());
    if (!reference.grads[i].defined()) continue;
    EXPECT_EQ(bf16.grads[i].scalar_type(), torch::kFloat);
    const double size = std::max(reference.grads[i].norm().item<double>(), 0.01 * largest);
    EXPECT_LT((bf16.grads[i] - reference.grads[i]).norm().item<double>() / size, 0.15);
  }

  set_text_side_autocast(false);
  const auto off = run_encoder(encoder, tokens, lengths, /*bf16=*/true);
  for (size_t i = 0; i < reference.outputs.size(); ++i) EXPECT_TRUE(torch::equal(off.outputs[i], reference.outputs[i]));
  for (size_t i = 0; i < reference.grads.size(); ++i) {
    SCOPED_TRACE(reference.names[i]);
    if (reference.grads[i].defined()) EXPECT_TRUE(torch::equal(off.grads[i], reference.grads[i]));
  }
}

}  // namespace
}  // namespace monoflow::models
