// The graph-captured training step (src/train/graphed_step.h). On the CPU: padding a batch up
// to its bucket changes no loss (what makes bucketed graphs exact). On a GPU (skipped
// without one): the replayed step equals the eager step on the same batch, a non-finite loss
// skips the update on the device, MAS's errors come back with their step, and each bucket
// records one graph.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "models/glow_tts.h"
#include "models/text_side_precision.h"
#include "small_model.h"
#include "train/fused_adam.h"
#include "train/graphed_step.h"
#include "train/precision.h"
#include "bench/step_bench.h"
#include "train/train_step.h"

namespace monoflow::train {
namespace {

bool have_cuda() { return torch::cuda::is_available(); }

models::GlowTTSOptions small_options() { return testing::small_model_options(); }

// `b` zero-padded to `t` tokens and `s` frames (what the graphed step does to its inputs).
data::Batch padded(const data::Batch& b, int64_t t, int64_t s) {
  namespace F = torch::nn::functional;
  data::Batch p = b;
  p.text = F::pad(b.text, F::PadFuncOptions({0, t - b.text.size(1)}));
  p.mel = F::pad(b.mel, F::PadFuncOptions({0, s - b.mel.size(2)}));
  return p;
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.detach().cpu().to(torch::kDouble), y = b.detach().cpu().to(torch::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item<double>();
}

// Model B with model A's weights (after A's DDI).
models::GlowTTS twin_of(models::GlowTTS& a) {
  models::GlowTTS b(a->options());
  torch::NoGradGuard no_grad;
  const auto pa = a->named_parameters();
  for (auto& p : b->named_parameters()) p.value().copy_(pa[p.key()]);
  b->set_ddi(false);
  b->to(a->parameters().front().device());
  return b;
}

// The graphed step clips its flat gradient buffer as one tensor: the same clamped values as
// the per-tensor clip of the eager step, and the same norm up to float rounding.
TEST(GraphedStep, ClippingTheFlatGradientsEqualsClippingEachOne) {
  torch::manual_seed(4);
  const auto flat = torch::randn({4 + 300 + 7 * 11}) * 4;
  auto copy = flat.clone();
  const auto original = flat.clone();
  std::vector<torch::Tensor> copies{copy.narrow(0, 4, 300).view({20, 15}), copy.narrow(0, 304, 77).view({7, 11})};
  const auto list_norm = clip_gradients(copies, 5.0);
  const auto flat_norm = clip_gradients(flat.narrow(0, 4, 377), 5.0);
  EXPECT_NEAR(flat_norm.item<double>(), list_norm.item<double>(), 1e-5 * list_norm.item<double>());
  EXPECT_GT(list_norm.item<double>(), 5.0);
  EXPECT_TRUE(torch::equal(flat, copy));
  EXPECT_EQ(flat.narrow(0, 4, 377).abs().max().item<float>(), 5.0f);  // some values were clamped
  EXPECT_TRUE(torch::equal(flat.narrow(0, 0, 4), original.narrow(0, 0, 4)));  // the head untouched
}

TEST(GraphedStep, PaddingToTheBucketChangesNoLoss) {
  torch::manual_seed(3);
  models::GlowTTS model(small_options());
  const data::Batch b = synthetic_batches(1, 3, 148, 80, 11)[0];
  model->set_ddi(true);
  StepOptions so;
  eval_step(model, b, so);  // DDI
  model->eval();
  const StepResult plain = eval_step(model, b, so);
  const StepResult pad = eval_step(model, padded(b, b.text.size(1) + 13, b.mel.size(2) + 70), so);
  EXPECT_LT(relative_difference(pad.loss_mle, plain.loss_mle), 1e-5);
  EXPECT_LT(relative_difference(pad.loss_dur, plain.loss_dur), 1e-5);
  // The same alignment inside the true lengths.
  EXPECT_TRUE(torch::equal(pad.out.durations.slice(1, 0, b.text.size(1)), plain.out.durations));
}

class GraphedStepCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
    set_allow_tf32(false);  // float32 everywhere: differences below are summation order only
    torch::manual_seed(5);
    eager = models::GlowTTS(small_options());
    eager->to(torch::kCUDA);
    eager->train();
    batches = synthetic_batches(2, 4, 148, 80, 17);
    // A second shape for sure: the first batch with more padding (the next text and mel buckets).
    batches[1] = padded(batches[0], batches[0].text.size(1) + 16, batches[0].mel.size(2) + 64);
    for (auto& b : batches) b = to_device(b, torch::kCUDA);
    options.mas.backend = align::Backend::kCudaFast;
    {
      torch::NoGradGuard no_grad;
      eager->set_ddi(true);
      eval_step(eager, batches[0], options);
    }
    graphed = twin_of(eager);
    graphed->train();
  }
  torch::optim::AdamOptions adam() const { return torch::optim::AdamOptions(1e-3).betas({0.9, 0.98}).eps(1e-9); }

  models::GlowTTS eager{nullptr}, graphed{nullptr};
  std::vector<data::Batch> batches;
  StepOptions options;
};

TEST_F(GraphedStepCuda, ReplayEqualsTheEagerStepOnTheSameBatch) {
  FusedAdam eager_opt(eager->parameters(), adam()), graph_opt(graphed->parameters(), adam());
  GraphedTrainStep step(graphed, graph_opt, options, GraphBuckets{16, 64, 4});
  for (int i = 0; i < 3; ++i) {
    const data::Batch& b = batches[i % 2];  // two shapes, the first one twice (a replay)
    torch::manual_seed(100 + i);  // same dropout for both
    const StepResult g = step.step(b, 1e-3, i + 1);
    const data::Batch& in = step.inputs();  // b padded to its bucket
    EXPECT_EQ(in.text.size(1) % 16, 0);
    // The bucket's length, or a little more where cuDNN measured slow (bucket_lengths.h).
    const int64_t bucket = (b.mel.size(2) + 63) / 64 * 64, extra = in.mel.size(2) - bucket;
    EXPECT_TRUE(extra == 0 || extra == 8 || extra == 16 || extra == 32) << in.mel.size(2);
    torch::manual_seed(100 + i);
    const StepResult e = train_step(eager, eager_opt, in, 1e-3, options);
    ASSERT_TRUE(e.finite);
    EXPECT_LT(relative_difference(g.loss_mle, e.loss_mle), 1e-5) << "step " << i + 1;
    EXPECT_LT(relative_difference(g.loss_dur, e.loss_dur), 1e-5) << "step " << i + 1;
    EXPECT_LT(relative_difference(g.grad_norm, e.grad_norm), 1e-4) << "step " << i + 1;
    EXPECT_TRUE(torch::equal(g.out.durations.cpu(), e.out.durations.cpu())) << "step " << i + 1;
  }
  EXPECT_EQ(step.graphs(), 2u);
  const GraphRecording rec = step.recording();
  EXPECT_EQ(rec.graphs, 2);
  EXPECT_GT(rec.lengths_ms, 0.0);
  EXPECT_GT(rec.warm_up_ms, 0.0);
  EXPECT_GT(rec.capture_ms, 0.0);
  // Adam turns each gradient into a step of about lr, even a near-zero one whose last bits
  // depend on summation order (cuDNN's split-K weight gradients): after three steps the
  // weights agree to a quarter of one step (1.0e-4 was exceeded by 1% on an H100).
  const auto pe = eager->named_parameters();
  double worst = 0;
  for (const auto& p : graphed->named_parameters()) {
    worst = std::max(worst, (p.value() - pe[p.key()]).abs().max().item<double>());
  }
  EXPECT_LT(worst, 2.5e-4);
  EXPECT_EQ(step.status().skipped, 0);
  graph_opt.sync_steps_from_device();
  for (const auto& p : graphed->parameters()) {
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*graph_opt.state().at(p.unsafeGetTensorImpl()));
    EXPECT_EQ(s.step(), 3);
  }
}

// Under bf16 autocast with the text side in bf16 too (models/text_side_precision.h): the replay
// takes the same kernels as the eager step, so the same losses and alignment, within the float32
// test's bounds (on an H100 the two were bitwise equal at all three steps, 2026-12-07).
TEST_F(GraphedStepCuda, ReplayEqualsTheEagerStepInBf16WithTheTextSideInBf16) {
  const models::TextSideAutocastScope text_side_on(true);
  options.bf16 = true;
  FusedAdam eager_opt(eager->parameters(), adam()), graph_opt(graphed->parameters(), adam());
  GraphedTrainStep step(graphed, graph_opt, options, GraphBuckets{16, 64, 4});
  for (int i = 0; i < 3; ++i) {
    const data::Batch& b = batches[i % 2];
    torch::manual_seed(200 + i);
    const StepResult g = step.step(b, 1e-3, i + 1);
    torch::manual_seed(200 + i);
    const StepResult e = train_step(eager, eager_opt, step.inputs(), 1e-3, options);
    ASSERT_TRUE(e.finite);
    EXPECT_LT(relative_difference(g.loss_mle, e.loss_mle), 1e-5) << "step " << i + 1;
    EXPECT_LT(relative_difference(g.loss_dur, e.loss_dur), 1e-5) << "step " << i + 1;
    EXPECT_LT(relative_difference(g.grad_norm, e.grad_norm), 1e-4) << "step " << i + 1;
    EXPECT_TRUE(torch::equal(g.out.durations.cpu(), e.out.durations.cpu())) << "step " << i + 1;
  }
  EXPECT_EQ(step.status().skipped, 0);
  // The setting bites: with the text side in float32 the same model gives another loss.
  torch::NoGradGuard no_grad;
  const double bf16_side = eval_step(eager, step.inputs(), options).loss_mle.item<double>();
  models::set_text_side_autocast(false);
  const double float_side = eval_step(eager, step.inputs(), options).loss_mle.item<double>();
  EXPECT_NE(bf16_side, float_side);
}

TEST_F(GraphedStepCuda, NonFiniteLossSkipsTheUpdateOnTheDevice) {
  FusedAdam opt(graphed->parameters(), adam());
  GraphedTrainStep step(graphed, opt, options);
  data::Batch bad = batches[0];
  bad.mel = bad.mel.clone();
  bad.mel[0][0][0] = std::nan("");
  std::vector<torch::Tensor> before;
  for (const auto& p : graphed->parameters()) before.push_back(p.detach().clone());
  step.step(bad, 1e-3, 1);
  step.step(bad, 1e-3, 2);
  GraphStatus s = step.status();
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(s.longest_nonfinite_run, 2);
  const auto params = graphed->parameters();
  for (size_t i = 0; i < params.size(); ++i) ASSERT_TRUE(torch::equal(params[i], before[i])) << i;
  step.step(batches[0], 1e-3, 3);  // a finite batch of the same shape updates again
  s = step.status();
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(s.longest_nonfinite_run, 2);
  bool moved = false;
  for (size_t i = 0; i < params.size(); ++i) moved = moved || !torch::equal(params[i], before[i]);
  EXPECT_TRUE(moved);
  opt.sync_steps_from_device();  // only the finite step counted
  const auto& s0 = static_cast<const torch::optim::AdamParamState&>(*opt.state().at(params[0].unsafeGetTensorImpl()));
  EXPECT_EQ(s0.step(), 1);
}

// A readback started behind a step holds that step's values, even when the next step has run
// (and changed them all) by the time it is finished: what the trainer's log steps rely on.
TEST_F(GraphedStepCuda, AReadbackHoldsTheStepItWasStartedBehind) {
  FusedAdam opt(graphed->parameters(), adam());
  GraphedTrainStep step(graphed, opt, options);
  const StepResult first = step.step(batches[0], 1e-3, 1);
  const double mle = first.loss_mle.item<double>(), dur = first.loss_dur.item<double>();
  const double norm = first.grad_norm.item<double>();
  step.start_readback();
  data::Batch bad = batches[0];
  bad.mel = bad.mel.clone();
  bad.mel[0][0][0] = std::nan("");
  step.step(bad, 1e-3, 2);  // queued behind the readback: NaN losses, one skipped update
  const GraphReadback r = step.finish_readback();
  EXPECT_EQ(r.loss_mle, mle);
  EXPECT_EQ(r.loss_dur, dur);
  EXPECT_EQ(r.grad_norm, norm);
  EXPECT_EQ(r.status.skipped, 0);
  step.start_readback();
  const GraphReadback after = step.finish_readback();
  EXPECT_TRUE(std::isnan(after.loss_mle));
  EXPECT_EQ(after.status.skipped, 1);
  EXPECT_EQ(after.status.longest_nonfinite_run, 1);
  EXPECT_THROW(step.finish_readback(), c10::Error);  // none under way
}

TEST_F(GraphedStepCuda, BadLengthsComeBackWithTheirStep) {
  FusedAdam opt(graphed->parameters(), adam());
  GraphedTrainStep step(graphed, opt, options);
  step.step(batches[0], 1e-3, 1);
  data::Batch bad = batches[0];
  bad.mel_lengths = bad.mel_lengths.clone();
  bad.mel_lengths[2] = 4;  // fewer frames than tokens: no monotonic alignment
  step.step(bad, 1e-3, 2);
  step.step(batches[0], 1e-3, 3);
  const GraphStatus s = step.status();
  EXPECT_EQ(s.bad_lengths_step, 2);
  EXPECT_EQ(s.bad_lengths_item, 2);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.timeout_step, 0);
}

// run.cudnn_search: auto (cudnn_search.h). The first shape is recorded with the search at once;
// another with cuDNN's heuristics, and again with the search once its replays have taken as long
// as that search did.
TEST_F(GraphedStepCuda, AShapeGetsTheSearchOnceItsReplaysHaveCostOne) {
  FusedAdam opt(graphed->parameters(), adam());
  GraphedTrainStep step(graphed, opt, options, GraphBuckets{16, 64, 4});
  step.step(batches[0], 1e-3, 1);
  GraphRecording r = step.recording();
  EXPECT_EQ(r.graphs, 1);
  EXPECT_EQ(r.searched, 1);
  EXPECT_GT(r.lengths_ms, 0.0);
  const double search_ms = r.lengths_ms + r.warm_up_ms;
  step.step(batches[1], 1e-3, 2);
  r = step.recording();
  EXPECT_EQ(r.graphs, 2);
  EXPECT_EQ(r.searched, 1);
  EXPECT_EQ(step.inputs().mel.size(2) % 64, 0) << "no length measured before the search";
  const auto start = std::chrono::steady_clock::now();
  int64_t n = 2;
  while (step.recording().searched == 1 && n < 50000) step.step(batches[1], 1e-3, ++n);
  const double replayed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r = step.recording();
  ASSERT_EQ(r.searched, 2) << "still on the heuristics after " << n << " steps";
  EXPECT_EQ(r.graphs, 3);
  EXPECT_EQ(step.graphs(), 2u) << "the heuristic graph was replaced, not kept beside";
  // The replays' GPU time (the schedule's measure) is at most the wall time they took.
  EXPECT_GE(replayed_ms, search_ms);
  const int64_t extra = step.inputs().mel.size(2) - (batches[1].mel.size(2) + 63) / 64 * 64;
  EXPECT_TRUE(extra == 0 || extra == 8 || extra == 16 || extra == 32) << step.inputs().mel.size(2);
  step.step(batches[1], 1e-3, ++n);
  EXPECT_EQ(step.recording().graphs, 3) << "a searched shape stays";
  EXPECT_EQ(step.status().skipped, 0);
  for (const auto& p : graphed->parameters()) ASSERT_TRUE(torch::isfinite(p).all().item<bool>());
}

TEST_F(GraphedStepCuda, NeverSearchingMeasuresNoLengths) {
  FusedAdam opt(graphed->parameters(), adam());
  GraphBuckets buckets;
  buckets.cudnn_search = CudnnSearch::kNever;
  GraphedTrainStep step(graphed, opt, options, buckets);
  for (int i = 0; i < 4; ++i) step.step(batches[i % 2], 1e-3, i + 1);
  EXPECT_EQ(step.recording().graphs, 2);
  EXPECT_EQ(step.recording().searched, 0);
  EXPECT_EQ(step.recording().lengths_ms, 0.0);
  EXPECT_EQ(step.status().skipped, 0);
}

TEST_F(GraphedStepCuda, OneGraphPerBucketAndTheOldestDropped) {
  FusedAdam opt(graphed->parameters(), adam());
  GraphedTrainStep step(graphed, opt, options, GraphBuckets{16, 64, 1, /*measured_lengths=*/false});
  step.step(batches[0], 1e-3, 1);
  step.step(batches[0], 1e-3, 2);
  EXPECT_EQ(step.graphs(), 1u);
  step.step(batches[1], 1e-3, 3);  // another bucket: the first graph goes
  EXPECT_EQ(step.graphs(), 1u);
  EXPECT_EQ(step.inputs().mel.size(2) % 64, 0);
  step.step(batches[0], 1e-3, 4);
  const GraphStatus s = step.status();
  EXPECT_EQ(s.skipped, 0);
  EXPECT_EQ(step.recording().graphs, 3) << "the first shape, dropped, was recorded again";
  EXPECT_EQ(step.recording().lengths_ms, 0.0) << "no lengths measured when measured_lengths is off";
  for (const auto& p : graphed->parameters()) ASSERT_TRUE(torch::isfinite(p).all().item<bool>());
}

}  // namespace
}  // namespace monoflow::train
