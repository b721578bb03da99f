// GraphedInference (infer/graphed_inference.h): the encoder and durations replayed as a CUDA
// graph per token bucket, the prior per text graph and frame bucket, and the decoder per frame
// bucket give GlowTTS::infer's durations and mel on the valid frames, with the same noise, and
// reuse a bucket's graphs (GPU tests skip without a device). On the CPU it refuses clearly.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "small_model.h"
#include "models/autocast.h"
#include "models/glow_tts.h"
#include "models/text_side_precision.h"
#include "train/precision.h"
#include "infer/graphed_inference.h"

namespace monoflow::train {
namespace {

models::GlowTTSOptions small_model() { return testing::small_model_options(); }

// The small model on the GPU in eval mode, its weights drawn with `seed`.
models::GlowTTS cuda_model(uint64_t seed) {
  torch::manual_seed(seed);
  models::GlowTTS model(small_model());
  model->to(torch::kCUDA);
  model->eval();
  return model;
}

// GlowTTS::infer and synth.infer of one text, each after seeding torch's generator alike, so
// that both draw the same noise: {eager, graphed}.
std::pair<models::InferenceOutput, models::InferenceOutput> eager_and_graphed(
    models::GlowTTS& model, GraphedInference& synth, const torch::Tensor& text, const torch::Tensor& lengths,
    double length_scale) {
  torch::manual_seed(100);
  auto eager = model->infer(text, lengths, {}, 0.667, length_scale);
  torch::manual_seed(100);
  auto graphed = synth.infer(text, lengths, {}, 0.667, length_scale);
  return {std::move(eager), std::move(graphed)};
}

// The GPU tests: skipped without a device; TF32 off while they run (restored however they end),
// so that graphed and eager inference agree to float32 rounding.
class GraphedInferenceCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    set_allow_tf32(false);
  }
  void TearDown() override { set_allow_tf32(true); }
};

TEST(GraphedInference, RefusesTheCpu) {
  EXPECT_FALSE(GraphedInference::supported(torch::kCPU));
  models::GlowTTS model(small_model());
  EXPECT_THROW(GraphedInference{model}, UserError);
}

TEST_F(GraphedInferenceCuda, EqualsEagerInferenceOnTheValidFramesAndReusesBuckets) {
  models::GlowTTS model = cuda_model(8);
  GraphedInference synth(model, GraphedInferenceOptions().frame_multiple(64));
  torch::NoGradGuard no_grad;
  auto text = torch::randint(1, 148, {1, 40}, torch::kLong).to(torch::kCUDA);
  auto lengths = torch::full({1}, 40, torch::kLong).to(torch::kCUDA);
  // Three calls: a length, a much longer one (another bucket), the first again (a replay).
  for (double length_scale : {3.0, 9.0, 3.0}) {
    SCOPED_TRACE("length scale " + std::to_string(length_scale));
    const auto [eager, graphed] = eager_and_graphed(model, synth, text, lengths, length_scale);
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
  EXPECT_EQ(synth.prior_graphs(), 2u) << "one text graph, two frame buckets";
  // A shorter text in the same token bucket replays that graph with more padding tokens.
  const auto shorter = text.narrow(1, 0, 35).contiguous();
  const auto shorter_lengths = torch::full({1}, 35, torch::kLong).to(torch::kCUDA);
  const auto [eager, graphed] = eager_and_graphed(model, synth, shorter, shorter_lengths, 3.0);
  ASSERT_EQ(graphed.y.sizes(), eager.y.sizes());
  EXPECT_EQ(graphed.w_ceil.size(2), 35);
  EXPECT_TRUE(torch::equal(graphed.w_ceil, eager.w_ceil));
  EXPECT_LE((graphed.x_m - eager.x_m).abs().max().item<double>(), 1e-4);
  EXPECT_LE((graphed.y - eager.y).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(synth.text_graphs(), 1u);
}

// The prior's graph is GlowTTS::infer_expand on the text graph's outputs, exactly, with the
// caller's noise; lengths from elsewhere (GlowTTS::infer_lengths) are expanded eagerly.
TEST_F(GraphedInferenceCuda, ThePriorGraphEqualsInferExpandOnTheSameLengths) {
  models::GlowTTS model = cuda_model(9);
  GraphedInference synth(model);
  torch::NoGradGuard no_grad;
  const auto text = torch::randint(1, 148, {2, 30}, torch::kLong).to(torch::kCUDA);
  const auto lengths = torch::tensor({30, 21}, torch::kLong).to(torch::kCUDA);
  for (double length_scale : {4.0, 4.0}) {  // recorded, then replayed
    const auto from_graph = synth.infer_lengths(text, lengths, {}, length_scale);
    models::InferenceOutput eager = from_graph;
    for (auto* t : {&eager.w_ceil, &eager.x_m, &eager.x_logs, &eager.x_mask, &eager.y_lengths}) *t = t->clone();
    const auto noise = torch::randn({2, model->options().out_channels(), from_graph.max_frames}, torch::kCUDA);
    const auto graphed = synth.decode(from_graph, 0.5, noise);
    model->infer_expand(eager, 0.5, 64, noise);
    const int64_t n = from_graph.max_frames;
    ASSERT_EQ(graphed.z.sizes(), eager.z.narrow(2, 0, n).sizes());
    EXPECT_TRUE(torch::equal(graphed.z, eager.z.narrow(2, 0, n)));
    EXPECT_TRUE(torch::equal(graphed.z_m, eager.z_m.narrow(2, 0, n)));
    EXPECT_TRUE(torch::equal(graphed.z_mask, eager.z_mask.narrow(2, 0, n)));
    EXPECT_TRUE(torch::equal(graphed.attn, eager.attn.narrow(2, 0, n)));
    EXPECT_EQ(graphed.attn.size(1), 30) << "the text's tokens, not the bucket's";
    EXPECT_GT(eager.z.abs().max().item<double>(), 0.1);
  }
  EXPECT_EQ(synth.prior_graphs(), 1u);
  // GlowTTS's own lengths: no prior graph, the same prior.
  auto own = model->infer_lengths(text, lengths, {}, 4.0);
  const auto noise = torch::randn({2, model->options().out_channels(), own.max_frames}, torch::kCUDA);
  const auto graphed = synth.decode(own, 0.5, noise);
  model->infer_expand(own, 0.5, 64, noise);
  EXPECT_TRUE(torch::equal(graphed.z, own.z.narrow(2, 0, own.max_frames)));
  EXPECT_EQ(synth.prior_graphs(), 1u);
}

// max_graphs bounds every stage, the prior graphs over all text graphs: with one graph a
// stage, two texts of two token buckets and two frame buckets in turn keep one of each, and
// each call still gives eager's mel.
TEST_F(GraphedInferenceCuda, KeepsAtMostMaxGraphsOfEachStage) {
  models::GlowTTS model = cuda_model(10);
  GraphedInference synth(model, GraphedInferenceOptions().max_graphs(1));
  torch::NoGradGuard no_grad;
  const auto text = torch::randint(1, 148, {1, 40}, torch::kLong).to(torch::kCUDA);
  const auto longer = torch::randint(1, 148, {1, 60}, torch::kLong).to(torch::kCUDA);
  const auto lengths = torch::full({1}, 40, torch::kLong).to(torch::kCUDA);
  const auto longer_lengths = torch::full({1}, 60, torch::kLong).to(torch::kCUDA);
  for (const auto& [t, l, scale] : {std::tuple{text, lengths, 3.0}, std::tuple{text, lengths, 9.0},
                                    std::tuple{longer, longer_lengths, 3.0}, std::tuple{text, lengths, 3.0}}) {
    SCOPED_TRACE("tokens " + std::to_string(t.size(1)) + ", length scale " + std::to_string(scale));
    const auto [eager, graphed] = eager_and_graphed(model, synth, t, l, scale);
    ASSERT_EQ(graphed.y.sizes(), eager.y.sizes());
    EXPECT_LE((graphed.y - eager.y).abs().max().item<double>(), 1e-4);
    EXPECT_EQ(synth.graphs(), 1u);
    EXPECT_EQ(synth.text_graphs(), 1u);
    EXPECT_EQ(synth.prior_graphs(), 1u);
  }
}

// A prior graph reads its text graph's outputs, so it goes when that text graph is evicted: a
// text graph recorded again for the shape must not find the old one's prior graph, which would
// replay the first text's prior. One graph a stage, each recorded at a shape's second use, so
// that the longer text's text graph evicts the first's before its own prior graph is recorded.
TEST_F(GraphedInferenceCuda, EvictingATextGraphDropsItsPriorGraphs) {
  models::GlowTTS model = cuda_model(11);
  GraphedInference synth(model, GraphedInferenceOptions().max_graphs(1).eager_uses(1));
  torch::NoGradGuard no_grad;
  const auto tokens = [](int64_t n, uint64_t seed) {
    torch::manual_seed(seed);
    return torch::randint(1, 148, {1, n}, torch::kLong).to(torch::kCUDA);
  };
  const auto first = tokens(40, 1), other = tokens(40, 2), longer = tokens(60, 3);
  const auto lengths = torch::full({1}, 40, torch::kLong).to(torch::kCUDA);
  const auto longer_lengths = torch::full({1}, 60, torch::kLong).to(torch::kCUDA);
  // `first` and `other` share the token bucket and the frame bucket (64 frames): `other` would
  // find `first`'s prior graph.
  const auto bucket = [&](const torch::Tensor& t) { return (model->infer_lengths(t, lengths, {}, 3.0).max_frames + 63) / 64; };
  ASSERT_EQ(bucket(first), bucket(other));
  for (const auto& [t, l] : {std::pair{first, lengths}, std::pair{first, lengths}, std::pair{first, lengths},
                             std::pair{longer, longer_lengths}, std::pair{longer, longer_lengths},
                             std::pair{other, lengths}, std::pair{other, lengths}}) {
    const auto [eager, graphed] = eager_and_graphed(model, synth, t, l, 3.0);
    ASSERT_EQ(graphed.y.sizes(), eager.y.sizes());
    EXPECT_LE((graphed.y - eager.y).abs().max().item<double>(), 1e-4);
    EXPECT_LE(synth.prior_graphs(), 1u);
  }
  EXPECT_EQ(synth.text_graphs(), 1u);
}

// Under bf16 autocast with the text side in bf16 (the training default, and bench_inference's
// bf16 rows): a text that fills its token bucket runs the same kernels graphed and eager, so the
// two agree as in float32. A shorter text is padded in the graph, and the convolutions and
// products over the longer rows may round differently in bf16: the encoder's outputs then agree
// to bf16 rounding, the durations to within a frame a token. (Passed on an H200, 2026-12-07; the
// differences are printed with each run, for tightening the bounds.)
TEST_F(GraphedInferenceCuda, AgreesWithEagerInferenceUnderBf16WithTheTextSideInBf16) {
  models::GlowTTS model = cuda_model(12);
  GraphedInference synth(model);
  torch::NoGradGuard no_grad;
  const models::TextSideAutocastScope text_side(true);
  const models::Bf16Autocast autocast(true, torch::kCUDA);
  const auto full = torch::randint(1, 148, {1, 48}, torch::kLong).to(torch::kCUDA);
  const auto full_lengths = torch::full({1}, 48, torch::kLong).to(torch::kCUDA);
  for (int call = 0; call < 2; ++call) {  // recorded, then replayed
    const auto [eager, graphed] = eager_and_graphed(model, synth, full, full_lengths, 3.0);
    ASSERT_EQ(graphed.y.sizes(), eager.y.sizes());
    EXPECT_TRUE(torch::equal(graphed.w_ceil, eager.w_ceil));
    const double x_m = (graphed.x_m - eager.x_m).abs().max().item<double>();
    const double y = (graphed.y - eager.y).abs().max().item<double>();
    std::printf("bf16, 48 of 48 tokens, call %d: |x_m| %.3g, |y| %.3g (|y| max %.3g)\n", call, x_m, y,
                eager.y.abs().max().item<double>());
    EXPECT_LE(x_m, 1e-4);
    EXPECT_LE(y, 1e-3);
    EXPECT_GT(eager.y.abs().max().item<double>(), 0.1);
  }
  const auto shorter = full.narrow(1, 0, 40).contiguous();
  const auto shorter_lengths = torch::full({1}, 40, torch::kLong).to(torch::kCUDA);
  for (int call = 0; call < 2; ++call) {
    const auto [eager, graphed] = eager_and_graphed(model, synth, shorter, shorter_lengths, 3.0);
    ASSERT_EQ(graphed.w_ceil.size(2), 40);
    const double x_m = (graphed.x_m - eager.x_m).abs().max().item<double>();
    const double logw = (graphed.logw - eager.logw).abs().max().item<double>();
    const double w_ceil = (graphed.w_ceil - eager.w_ceil).abs().max().item<double>();
    const double x_m_scale = eager.x_m.abs().max().item<double>();
    std::printf("bf16, 40 of 48 tokens, call %d: |x_m| %.3g of %.3g, |logw| %.3g, |w_ceil| %.0f, frames %ld / %ld\n",
                call, x_m, x_m_scale, logw, w_ceil, static_cast<long>(graphed.max_frames),
                static_cast<long>(eager.max_frames));
    EXPECT_LE(x_m, 2e-2 * x_m_scale) << "bf16 rounding is 2^-8 of a value";
    EXPECT_LE(logw, 5e-2);
    EXPECT_LE(w_ceil, 1.0);
    if (torch::equal(graphed.w_ceil, eager.w_ceil)) {
      ASSERT_EQ(graphed.y.sizes(), eager.y.sizes());
      const double y = (graphed.y - eager.y).abs().max().item<double>();
      std::printf("  same durations: |y| %.3g\n", y);
      EXPECT_LE(y, 5e-2 * eager.y.abs().max().item<double>());
    }
  }
  EXPECT_EQ(synth.text_graphs(), 1u) << "40 and 48 tokens share one bucket";
}

}  // namespace
}  // namespace monoflow::train
