// The ljspeech model on a GPU (skipped without one): same results as on the CPU, every MAS
// backend on the GPU logp gives the same alignment, a bfloat16-autocast step, and the time of
// a training step (forward, MAS, backward) on an LJSpeech-shaped batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "model_test_util.h"
#include "models/autocast.h"
#include "models/glow_tts.h"
#include "models/losses.h"

namespace monoflow::models {
namespace {

bool have_cuda() { return torch::cuda::is_available(); }

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

struct Batch {
  torch::Tensor text, text_lengths, mel, mel_lengths;
};

// The training-step batch of docs/design.md ("Benchmark specifications: Training step"): text
// lengths U[60,180], mel = round(len * 5.6 * U(0.85,1.15)) capped at 1000, 148 symbols, 80 mels.
Batch ljspeech_batch(int64_t batch, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batch b;
  b.text_lengths = torch::randint(60, 181, {batch}, gen, torch::kLong);
  auto scale = torch::rand({batch}, gen, torch::kDouble) * 0.3 + 0.85;
  b.mel_lengths = torch::clamp_max(torch::round(b.text_lengths.to(torch::kDouble) * 5.6 * scale), 1000).to(torch::kLong);
  const int64_t t_max = b.text_lengths.max().item<int64_t>(), s_max = b.mel_lengths.max().item<int64_t>();
  b.text = torch::randint(1, 148, {batch, t_max}, gen, torch::kLong) *
           sequence_mask(b.text_lengths, t_max).to(torch::kLong);
  b.mel = torch::randn({batch, 80, s_max}, gen, torch::kFloat) * sequence_mask(b.mel_lengths, s_max).unsqueeze(1);
  return b;
}

align::MasOptions mas(align::Backend backend) {
  align::MasOptions o;
  o.backend = backend;
  return o;
}

TEST(GlowTTSCuda, LjspeechModelMatchesCpuAndAllMasBackendsAgree) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  torch::manual_seed(21);
  GlowTTS model(GlowTTSOptions(148, 80));
  auto b = ljspeech_batch(4, 5);
  model->set_ddi(true);  // data-dependent ActNorm values, so that logdet is not ~0
  model->forward(b.text, b.text_lengths, b.mel * 3, b.mel_lengths, {}, mas(align::Backend::kCpu));
  model->eval();
  auto cpu = model->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, {}, mas(align::Backend::kCpu));
  model->to(torch::kCUDA);
  auto gpu = model->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, {}, mas(align::Backend::kCpu));
  EXPECT_TRUE(gpu.z.is_cuda());
  EXPECT_LT(max_abs_diff(gpu.x_m, cpu.x_m), 1e-3);
  EXPECT_LT(max_abs_diff(gpu.logw, cpu.logw), 1e-3);
  EXPECT_LT(max_abs_diff(gpu.z, cpu.z), 1e-3);
  // logdet sums ~B*80*S/2 terms; at initialisation it is near 0 (orthogonal InvConvNear,
  // identity ActNorm/couplings), so the bound is absolute, scaled by its size.
  EXPECT_LT(max_abs_diff(gpu.logdet, cpu.logdet), 1e-3 * std::max(1.0, cpu.logdet.abs().max().item<double>()));
  auto loss = [](const GlowTTSOutput& o) { return mle_loss(o.z, o.z_m, o.z_logs, o.logdet, o.z_mask).item<double>(); };
  EXPECT_NEAR(loss(gpu), loss(cpu), 1e-3);
  for (auto backend : {align::Backend::kCuda, align::Backend::kCudaFast}) {
    if (!align::backend_available(backend)) continue;
    auto out = model->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, {}, mas(backend));
    EXPECT_TRUE(torch::equal(out.attn, gpu.attn)) << align::backend_name(backend);
    EXPECT_TRUE(torch::equal(out.durations, gpu.durations)) << align::backend_name(backend);
  }
}

TEST(GlowTTSCuda, TrainingStepTimesAndBfloat16Autocast) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  at::globalContext().setAllowTF32CuBLAS(true);  // the trainer's default (run.allow_tf32)
  at::globalContext().setAllowTF32CuDNN(true);
  torch::manual_seed(22);
  GlowTTS model(GlowTTSOptions(148, 80));
  model->to(torch::kCUDA);
  model->train();
  auto b = ljspeech_batch(32, 7);
  auto text = b.text.cuda(), text_lengths = b.text_lengths.cuda(), mel = b.mel.cuda(), mel_lengths = b.mel_lengths.cuda();
  model->set_ddi(true);
  {
    torch::NoGradGuard no_grad;
    model->forward(text, text_lengths, mel, mel_lengths, {}, mas(align::Backend::kCpu));
  }
  auto step = [&](align::Backend backend, bool bf16) {
    torch::Tensor l;
    {
      const Bf16Autocast autocast(bf16, torch::kCUDA);
      auto out = model->forward(text, text_lengths, mel, mel_lengths, {}, mas(backend));
      l = mle_loss(out.z, out.z_m, out.z_logs, out.logdet, out.z_mask) +
          duration_loss(out.logw, out.logw_, text_lengths);
    }
    model->zero_grad();
    l.backward();
    torch::cuda::synchronize();
    return l.item<double>();
  };
  for (bool bf16 : {false, true}) {
    for (auto backend : {align::Backend::kCpu, align::Backend::kCuda, align::Backend::kCudaFast}) {
      if (!align::backend_available(backend)) continue;
      std::vector<double> ms;
      double loss = 0;
      for (int i = 0; i < 7; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        loss = step(backend, bf16);
        auto t1 = std::chrono::steady_clock::now();
        if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::cout << "[ step ] B=32 ljspeech model, " << (bf16 ? "bf16 autocast" : "fp32") << ", MAS "
                << align::backend_name(backend) << ": median " << ms[ms.size() / 2] << " ms (forward+MAS+backward), loss "
                << loss << "\n";
      EXPECT_TRUE(std::isfinite(loss));
      EXPECT_LT(loss, 10.0);
    }
  }
}

}  // namespace
}  // namespace monoflow::models

namespace monoflow::models {

// MAS must see float32 log-likelihoods whatever the autocast state: under bf16 autocast the
// matmuls of compute_logp would otherwise run in bf16, and --compare-align (which recomputes
// logp outside autocast) found paths that differed at near-ties.
TEST(GlowTTSCuda, LogpIsFloat32AndUnchangedUnderAutocast) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(7);
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  auto x_m = torch::randn({2, 80, 37}, opts), x_logs = 0.1 * torch::randn({2, 80, 37}, opts);
  auto z = torch::randn({2, 80, 150}, opts);
  auto plain = compute_logp(x_m, x_logs, z);
  torch::Tensor under_autocast;
  {
    const Bf16Autocast autocast(true, torch::kCUDA);
    under_autocast = compute_logp(x_m, x_logs, z);
  }
  EXPECT_EQ(under_autocast.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(plain, under_autocast));
}

}  // namespace monoflow::models
