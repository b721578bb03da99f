// cuda-fast v4's warp hand-over under perturbed timing (kernels/mas_fast_fused.cu, "Why the
// hand-over is race-free"): thousands of launches with seeded random sleeps at the points
// where its order matters must give the cpu backend's durations exactly; the same stress
// with a deliberately early release must not (so the sleeps do expose a misordered
// hand-over); and a small-shape set that compute-sanitizer's racecheck finishes in seconds
// (scripts/gpu.d/racecheck.sh). Calls the kernel directly: the jitter is a test hook, not an
// option of maximum_path. Skipped without a GPU.
#include <cstdlib>
#include <string>

#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "align/kernels/mas_kernels.h"
#include "align/mas.h"
#include "mas_test_util.h"

namespace monoflow::align {
namespace {

using kernels::FusedJitter;

class MasHandoverCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available() || !backend_available(Backend::kCudaFast)) {
      GTEST_SKIP() << "no CUDA device (or built without CUDA)";
    }
  }
};

// A batch on both devices with its cpu-backend durations.
struct Case {
  torch::Tensor logp, text_lengths, mel_lengths;  // on the GPU
  torch::Tensor expected;                          // [B, T] int32, cpu backend
};

Case make_case(int64_t batch, int64_t max_text, int64_t max_mel, bool exact, torch::Generator& gen) {
  const testing::RandomBatch in = testing::random_batch(batch, max_text, max_mel, exact, gen);
  MasOptions cpu;
  cpu.keep_input = true;
  cpu.want_path = false;
  Case c;
  c.expected = maximum_path(in.logp, in.text_lengths, in.mel_lengths, cpu).durations;
  c.logp = in.logp.cuda();
  c.text_lengths = in.text_lengths.cuda();
  c.mel_lengths = in.mel_lengths.cuda();
  return c;
}

// One launch of the fused kernel; the durations, or an undefined tensor when the launch was
// refused. Fails the test when a hand-over wait gave up (the timeout flag).
torch::Tensor run_fused(const Case& c, int rows_per_lane, FusedJitter jitter, unsigned seed) {
  const int batch = static_cast<int>(c.logp.size(0)), max_text = static_cast<int>(c.logp.size(1)),
            max_mel = static_cast<int>(c.logp.size(2));
  const kernels::FastMasLayout layout = kernels::fast_mas_layout(batch, max_text, max_mel, rows_per_lane);
  const auto ints = torch::dtype(torch::kInt32).device(torch::kCUDA);
  torch::Tensor workspace = torch::zeros({layout.starts_offset + int64_t{batch} * max_text}, ints);
  torch::Tensor durations = torch::full({batch, max_text}, -7, ints);
  const cudaError_t err = kernels::launch_fast_mas_fused(
      c.logp.data_ptr<float>(), max_text, max_mel, {c.text_lengths.data_ptr(), true},
      {c.mel_lengths.data_ptr(), true}, -1e32f, layout, workspace.data_ptr<int32_t>(),
      durations.data_ptr<int32_t>(), /*stream=*/nullptr, jitter, seed);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const torch::Tensor flags = workspace.narrow(0, 0, 3).cpu();
  EXPECT_EQ(flags[0].item<int>(), 0) << "bad lengths";
  EXPECT_EQ(flags[1].item<int>(), 0) << "non-finite value";
  EXPECT_EQ(flags[2].item<int>(), 0) << "a hand-over wait gave up";
  return durations.cpu();
}

int runs_from_env(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::max(1, std::atoi(v)) : fallback;
}

// Random multi-warp shapes (2 to 7 warps at K=2) that fit one block, a fresh batch every
// `seeds_per_case` launches; counts the launches whose durations differ from the cpu backend.
struct StressResult {
  int launches = 0, differing = 0;
};
StressResult stress(FusedJitter jitter, int launches, int seeds_per_case, bool both_k, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  // The limit maximum_path's cuda-fast dispatch checks v4's block against.
  const int64_t limit = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin;
  StressResult r;
  Case c;
  int k = 2;
  for (int n = 0; n < launches; ++n) {
    if (n % seeds_per_case == 0) {
      for (;;) {  // a shape whose block fits, with at least two warps
        const int64_t t = torch::randint(65, 420, {1}, gen).item<int64_t>();
        int64_t s = torch::randint(t, std::min<int64_t>(4 * t, 1100) + 1, {1}, gen).item<int64_t>();
        k = both_k && torch::randint(0, 2, {1}, gen).item<int64_t>() ? 4 : 2;
        if (jitter == FusedJitter::kSleepEarlyRelease) s = (s + 3) / 4 * 4;  // its one instance: rows 16-byte aligned
        const auto layout = kernels::fast_mas_layout(6, static_cast<int>(t), static_cast<int>(s), k);
        const int64_t bytes = kernels::fast_mas_fused_smem(layout);
        if (layout.warps_per_item < 2 || bytes < 0 || bytes > limit) continue;
        c = make_case(6, t, s, n % 2 == 0, gen);
        break;
      }
    }
    const torch::Tensor got = run_fused(c, k, jitter, static_cast<unsigned>(seed * 7919 + n + 1));
    if (!got.defined()) {
      ADD_FAILURE() << "launch refused at T=" << c.logp.size(1) << " S=" << c.logp.size(2) << " K=" << k;
      return r;
    }
    ++r.launches;
    if (!torch::equal(got, c.expected)) ++r.differing;
  }
  return r;
}

TEST_F(MasHandoverCuda, FusedKernelEqualsCpuUnderRandomSleeps) {
  // MONOFLOW_HANDOVER_LAUNCHES raises the count for a longer hunt.
  const int launches = runs_from_env("MONOFLOW_HANDOVER_LAUNCHES", 2000);
  const StressResult r = stress(FusedJitter::kSleep, launches, 10, /*both_k=*/true, 11);
  EXPECT_EQ(r.launches, launches);
  EXPECT_EQ(r.differing, 0) << "of " << r.launches << " launches";
}

TEST_F(MasHandoverCuda, StressCatchesAReleaseBeforeTheWrites) {
  // The negative control: the same stress with each chunk published before its row is
  // written. If the sleeps did not reorder the warps, this would pass unnoticed.
  const StressResult r = stress(FusedJitter::kSleepEarlyRelease, 200, 10, /*both_k=*/false, 12);
  EXPECT_EQ(r.launches, 200);
  EXPECT_GT(r.differing, 0) << "an early release went unnoticed in " << r.launches << " launches";
}

TEST_F(MasHandoverCuda, SmallShapesForRacecheck) {
  // What scripts/gpu.d/racecheck.sh runs under racecheck, memcheck and synccheck: both K, both
  // copy widths, 2-3 warps per utterance, no sleeps (production's kernels).
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  for (const auto& [t, s] : std::vector<std::pair<int64_t, int64_t>>{{130, 200}, {140, 203}}) {
    const Case c = make_case(3, t, s, true, gen);
    for (const int k : {2, 4}) {
      SCOPED_TRACE("T=" + std::to_string(t) + " S=" + std::to_string(s) + " K=" + std::to_string(k));
      const torch::Tensor got = run_fused(c, k, FusedJitter::kNone, 0);
      ASSERT_TRUE(got.defined());
      EXPECT_TRUE(torch::equal(got, c.expected));
    }
  }
}

}  // namespace
}  // namespace monoflow::align
