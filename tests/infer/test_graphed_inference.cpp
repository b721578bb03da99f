// GraphedInference (infer/graphed_inference.h): the encoder and durations replayed as a CUDA
// graph per token bucket and the decoder per frame bucket give GlowTTS::infer's durations and
// mel on the valid frames, with the same noise, and reuse a bucket's graphs (GPU tests skip
// without a device). On the CPU it refuses clearly.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "small_model.h"
#include "models/glow_tts.h"
#include "train/precision.h"
#include "infer/graphed_inference.h"

namespace monoflow::train {
namespace {

models::GlowTTSOptions small_model() { return testing::small_model_options(); }

TEST(GraphedInference, RefusesTheCpu) {
  EXPECT_FALSE(GraphedInference::supported(torch::kCPU));
  models::GlowTTS model(small_model());
  EXPECT_THROW(GraphedInference{model}, UserError);
}

TEST(GraphedInferenceCuda, EqualsEagerInferenceOnTheValidFramesAndReusesBuckets) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  set_allow_tf32(false);
  torch::manual_seed(8);
  models::GlowTTS model(small_model());
  model->to(torch::kCUDA);
  model->eval();
  GraphedInference synth(model, /*frame_multiple=*/64);
  torch::NoGradGuard no_grad;
  auto text = torch::randint(1, 148, {1, 40}, torch::kLong).to(torch::kCUDA);
  auto lengths = torch::full({1}, 40, torch::kLong).to(torch::kCUDA);
  // Three calls: a length, a much longer one (another bucket), the first again (a replay).
  for (double length_scale : {3.0, 9.0, 3.0}) {
    SCOPED_TRACE("length scale " + std::to_string(length_scale));
    torch::manual_seed(100);
    const auto eager = model->infer(text, lengths, {}, 0.667, length_scale);
    torch::manual_seed(100);
    const auto graphed = synth.infer(text, lengths, {}, 0.667, length_scale);
    ASSERT_EQ(graphed.y.sizes(), eager.y.sizes());
    EXPECT_TRUE(torch::equal(graphed.y_lengths, eager.y_lengths));
    EXPECT_TRUE(torch::equal(graphed.w_ceil, eager.w_ceil));
    EXPECT_EQ(graphed.max_frames, eager.y.size(2));
    const double diff = (graphed.y - eager.y).abs().max().item<double>();
    EXPECT_LE(diff, 1e-4);
    EXPECT_GT(eager.y.abs().max().item<double>(), 0.1);  // a real output, not zeros on both sides
  }
  EXPECT_EQ(synth.graphs(), 2u);
  EXPECT_EQ(synth.text_graphs(), 1u) << "40 tokens: one bucket of 48";
  // A shorter text in the same token bucket replays that graph with more padding tokens.
  const auto shorter = text.narrow(1, 0, 35).contiguous();
  const auto shorter_lengths = torch::full({1}, 35, torch::kLong).to(torch::kCUDA);
  torch::manual_seed(100);
  const auto eager = model->infer(shorter, shorter_lengths, {}, 0.667, 3.0);
  torch::manual_seed(100);
  const auto graphed = synth.infer(shorter, shorter_lengths, {}, 0.667, 3.0);
  ASSERT_EQ(graphed.y.sizes(), eager.y.sizes());
  EXPECT_EQ(graphed.w_ceil.size(2), 35);
  EXPECT_TRUE(torch::equal(graphed.w_ceil, eager.w_ceil));
  EXPECT_LE((graphed.x_m - eager.x_m).abs().max().item<double>(), 1e-4);
  EXPECT_LE((graphed.y - eager.y).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(synth.text_graphs(), 1u);
  set_allow_tf32(true);
}

}  // namespace
}  // namespace monoflow::train
