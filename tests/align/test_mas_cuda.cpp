// The CUDA backends against the cpu backend: exact equality of every path element and
// duration on random padded batches up to T=2048, S=8192; in-place semantics of `cuda`;
// errors. Skipped without a GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "align/mas.h"
#include "align/mas_tuning.h"
#include "common/error.h"
#include "mas_test_util.h"

namespace monoflow::align {
namespace {

using testing::random_batch;

class MasCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available() || !backend_available(Backend::kCuda)) {
      GTEST_SKIP() << "no CUDA device (or built without CUDA)";
    }
  }
};

// Fills freed GPU memory with a NaN pattern so that an output element the kernels forget
// to write shows up (the caching allocator hands the same blocks out again).
void poison_gpu_memory(int64_t bytes) {
  torch::Tensor junk = torch::empty({bytes / 4 + 1}, torch::dtype(torch::kInt32).device(torch::kCUDA));
  junk.fill_(0x7fc0dead);
}

struct Variant {
  std::string name;
  Backend backend;
  int rows_per_lane;
  int kernel = 0;  // FastMasTuning::kernel
  FastMasTuning tuning() const { return {kernel, rows_per_lane}; }
};

// The backends and cuda-fast kernels to check at this shape: v4 (fused, one block per
// utterance) only where its block fits, which holds up to T=256, S=1100 on every GPU with
// 227 KB of shared memory per block (K=2: 145 KB there). The K4 and default entries take v4
// wherever it fits, v3 (the split kernels) elsewhere; K8 is always v3. The versions production
// no longer runs (v1, v2) are checked against the CPU reference by dev/cuda/mas_fast.cu
// (ctest mas_fast_dev_vs_cpu).
std::vector<Variant> gpu_variants(int64_t max_text, int64_t max_mel) {
  std::vector<Variant> all = {{"cuda", Backend::kCuda, 0},
          {"cuda-fast/default", Backend::kCudaFast, 0},
          {"cuda-fast/K4", Backend::kCudaFast, 4},
          {"cuda-fast/K8", Backend::kCudaFast, 8},
          {"cuda-fast/v3-K4", Backend::kCudaFast, 4, 3},
          {"cuda-fast/v4-K2", Backend::kCudaFast, 2, 4},
          {"cuda-fast/v4-K4", Backend::kCudaFast, 4, 4}};
  std::vector<Variant> usable;
  for (const Variant& v : all) {
    if (v.kernel == 4 && (max_text > 256 || max_mel > 1100)) continue;
    usable.push_back(v);
  }
  return usable;
}

MasResult run(const Variant& v, const testing::RandomBatch& in, bool keep_input = true) {
  MasOptions o;
  o.backend = v.backend;
  o.keep_input = keep_input;
  const int64_t bytes = in.logp.numel() * 4;
  poison_gpu_memory(2 * bytes + (1 << 20));
  return maximum_path(in.logp.cuda(), in.text_lengths.cuda(), in.mel_lengths, o, v.tuning());
}

void expect_same_as_cpu(const testing::RandomBatch& in, const std::string& what) {
  MasOptions cpu;
  cpu.keep_input = true;
  const MasResult ref = maximum_path(in.logp, in.text_lengths, in.mel_lengths, cpu);
  for (const Variant& v : gpu_variants(in.logp.size(1), in.logp.size(2))) {
    SCOPED_TRACE(what + " " + v.name);
    const MasResult r = run(v, in);
    ASSERT_TRUE(r.path.is_cuda());
    ASSERT_TRUE(torch::equal(r.durations.cpu(), ref.durations));
    ASSERT_TRUE(torch::equal(r.path.cpu(), ref.path));
  }
}

TEST_F(MasCuda, IdenticalToCpuOnSmallAndOddShapes) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(21);
  const std::vector<std::array<int64_t, 3>> shapes = {
      {3, 1, 1}, {4, 1, 7}, {4, 5, 5}, {5, 7, 30}, {8, 37, 150}, {6, 129, 517}, {5, 200, 203}};
  for (const auto& s : shapes) {
    for (bool exact : {true, false}) {
      auto in = random_batch(s[0], s[1], s[2], exact, gen);
      expect_same_as_cpu(in, "B=" + std::to_string(s[0]) + " T=" + std::to_string(s[1]) +
                                 " S=" + std::to_string(s[2]) + (exact ? " ties" : " gaussian"));
    }
  }
}

TEST_F(MasCuda, IdenticalToCpuOnTrainingShapes) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(22);
  auto in = random_batch(32, 180, 1000, false, gen);
  expect_same_as_cpu(in, "training");
  auto ties = random_batch(32, 180, 1000, true, gen);
  expect_same_as_cpu(ties, "training ties");
}

TEST_F(MasCuda, IdenticalToCpuOnLongShapes) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(23);
  expect_same_as_cpu(random_batch(3, 700, 2803, false, gen), "long padded");
  expect_same_as_cpu(random_batch(4, 1024, 4096, true, gen), "long ties");
  expect_same_as_cpu(random_batch(2, 2048, 8192, false, gen, /*full_lengths=*/true), "T=2048 full");
  expect_same_as_cpu(random_batch(3, 2048, 8192, false, gen), "T=2048 padded");
}

// One cuda-fast kernel version with K rows per lane against the cpu backend, every element.
void expect_version_matches_cpu(const testing::RandomBatch& in, int version, int rows_per_lane,
                                const std::string& what) {
  MasOptions cpu;
  cpu.keep_input = true;
  const MasResult ref = maximum_path(in.logp, in.text_lengths, in.mel_lengths, cpu);
  MasOptions o;
  o.backend = Backend::kCudaFast;
  poison_gpu_memory(2 * in.logp.numel() * 4);
  const MasResult r = maximum_path(in.logp.cuda(), in.text_lengths.cuda(), in.mel_lengths, o,
                                   FastMasTuning{version, rows_per_lane});
  ASSERT_TRUE(torch::equal(r.durations.cpu(), ref.durations)) << what;
  ASSERT_TRUE(torch::equal(r.path.cpu(), ref.path)) << what;
}

TEST_F(MasCuda, TaggedHandOverVariantIsIdenticalToCpu) {
  // cuda-fast v3 (hand-over through tagged 64-bit entries instead of release/acquire).
  auto gen = at::make_generator<at::CPUGeneratorImpl>(28);
  for (int k : {4, 8}) {
    for (auto s : std::vector<std::array<int64_t, 3>>{{5, 200, 203}, {6, 129, 517}, {32, 180, 1000},
                                                       {3, 700, 2803}, {3, 2048, 8192}}) {
      auto in = random_batch(s[0], s[1], s[2], s[1] < 1000, gen);
      expect_version_matches_cpu(in, 3, k, "K=" + std::to_string(k) + " T=" + std::to_string(s[1]));
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(MasCuda, PathsSatisfyTheInvariants) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(24);
  auto in = random_batch(6, 300, 1300, false, gen);
  for (const Variant& v : gpu_variants(in.logp.size(1), in.logp.size(2))) {
    SCOPED_TRACE(v.name);
    const MasResult r = run(v, in);
    const torch::Tensor path = r.path.cpu(), durations = r.durations.cpu();
    for (int64_t b = 0; b < 6; ++b) {
      testing::expect_valid_path(path[b], durations[b], in.text_lengths[b].item<int64_t>(),
                                 in.mel_lengths[b].item<int64_t>(), b);
    }
  }
}

TEST_F(MasCuda, CudaBackendLeavesTheCpuCumulativeScoresInPlace) {
  // Both work in place over exactly the band cells, so the whole tensors agree bit for bit.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(25);
  auto in = random_batch(4, 90, 400, false, gen);
  in.logp = torch::nan_to_num(in.logp, 0.0, 1e30, -1e30);  // comparable padding
  torch::Tensor host = in.logp.clone(), gpu = in.logp.cuda();
  MasOptions o;
  maximum_path(host, in.text_lengths, in.mel_lengths, o);
  o.backend = Backend::kCuda;
  maximum_path(gpu, in.text_lengths, in.mel_lengths, o);
  EXPECT_TRUE(torch::equal(gpu.cpu(), host));
  EXPECT_FALSE(torch::equal(host, in.logp));
  // keep_input works on a copy; cuda-fast never writes logp.
  for (Backend b : {Backend::kCuda, Backend::kCudaFast}) {
    torch::Tensor fresh = in.logp.cuda();
    o.backend = b;
    o.keep_input = b == Backend::kCuda;
    maximum_path(fresh, in.text_lengths, in.mel_lengths, o);
    EXPECT_TRUE(torch::equal(fresh.cpu(), in.logp)) << backend_name(b);
  }
}

TEST_F(MasCuda, HalfPrecisionInputsAndPathDtypes) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(26);
  auto in = random_batch(5, 60, 250, false, gen, /*full_lengths=*/true);
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    const torch::Tensor low = in.logp.to(dtype);
    MasOptions cpu;
    const MasResult ref = maximum_path(low, in.text_lengths, in.mel_lengths, cpu);
    for (const Variant& v : gpu_variants(in.logp.size(1), in.logp.size(2))) {
      MasOptions o;
      o.backend = v.backend;
      o.path_dtype = torch::kBool;
      const MasResult r =
          maximum_path(low.cuda(), in.text_lengths.cuda(), in.mel_lengths.cuda(), o, v.tuning());
      EXPECT_EQ(r.path.scalar_type(), torch::kBool);
      EXPECT_TRUE(torch::equal(r.path.cpu().to(torch::kFloat32), ref.path)) << v.name;
      EXPECT_TRUE(torch::equal(r.durations.cpu(), ref.durations)) << v.name;
    }
  }
}

TEST_F(MasCuda, PathDtypesAndDurationsOnly) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(27);
  auto in = random_batch(4, 33, 131, false, gen);
  MasOptions cpu;
  cpu.keep_input = true;
  const MasResult ref = maximum_path(in.logp, in.text_lengths, in.mel_lengths, cpu);
  for (const Variant& v : gpu_variants(in.logp.size(1), in.logp.size(2))) {
    for (auto dtype : {torch::kUInt8, torch::kFloat16, torch::kInt64, torch::kInt32}) {
      MasOptions o;
      o.backend = v.backend;
      o.keep_input = true;
      o.path_dtype = dtype;
      poison_gpu_memory(1 << 22);
      const MasResult r = maximum_path(in.logp.cuda(), in.text_lengths, in.mel_lengths, o, v.tuning());
      EXPECT_TRUE(torch::equal(r.path.cpu().to(torch::kFloat32), ref.path)) << v.name;
    }
    MasOptions o;
    o.backend = v.backend;
    o.want_path = false;
    const MasResult r = maximum_path(in.logp.cuda(), in.text_lengths, in.mel_lengths, o, v.tuning());
    EXPECT_FALSE(r.path.defined());
    EXPECT_TRUE(torch::equal(r.durations.cpu(), ref.durations)) << v.name;
  }
}

std::string error_of(const Variant& v, const torch::Tensor& logp, const torch::Tensor& text,
                     const torch::Tensor& mel) {
  MasOptions o;
  o.backend = v.backend;
  try {
    maximum_path(logp.cuda(), text.cuda(), mel.cuda(), o, v.tuning());
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST_F(MasCuda, RejectsUnknownTuningOptions) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(29);
  auto in = random_batch(2, 10, 40, false, gen);
  MasOptions o;
  o.backend = Backend::kCudaFast;
  FastMasTuning t;
  t.rows_per_lane = 5;
  EXPECT_THROW(maximum_path(in.logp.cuda(), in.text_lengths, in.mel_lengths, o, t), UserError);
  t.rows_per_lane = 8;
  t.kernel = 1;  // v1 is not in production (dev/cuda/mas_fast.cu)
  EXPECT_THROW(maximum_path(in.logp.cuda(), in.text_lengths, in.mel_lengths, o, t), UserError);
  t.kernel = 9;
  EXPECT_THROW(maximum_path(in.logp.cuda(), in.text_lengths, in.mel_lengths, o, t), UserError);
  t.kernel = 3;
  t.rows_per_lane = 2;  // K=2 exists for v4 only
  EXPECT_THROW(maximum_path(in.logp.cuda(), in.text_lengths, in.mel_lengths, o, t), UserError);
  t.kernel = 4;  // v4 needs one block per utterance: not at T=4096 (33 warps)
  auto long_in = random_batch(1, 4096, 4100, false, gen);
  EXPECT_THROW(maximum_path(long_in.logp.cuda(), long_in.text_lengths, long_in.mel_lengths, o, t), UserError);
}

TEST_F(MasCuda, FusedVariantIsIdenticalToCpuAcrossWarpCounts) {
  // v4 with 1 to 8 warps per utterance (K=2: 64 text rows per warp), padded and full lengths.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(31);
  for (auto s : std::vector<std::array<int64_t, 3>>{{7, 64, 300}, {5, 65, 66}, {6, 250, 1000},
                                                     {4, 300, 301}, {3, 400, 420}, {9, 180, 1001}}) {
    for (bool exact : {true, false}) {
      auto in = random_batch(s[0], s[1], s[2], exact, gen);
      expect_version_matches_cpu(in, 4, 2, "T=" + std::to_string(s[1]) + " S=" + std::to_string(s[2]));
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(MasCuda, ReportsBadLengthsAndNonFiniteValues) {
  for (const Variant& v : gpu_variants(40, 300)) {
    SCOPED_TRACE(v.name);
    const torch::Tensor logp = torch::zeros({3, 40, 300});
    const auto ok_t = torch::tensor({40, 10, 5}), ok_s = torch::tensor({300, 20, 5});
    EXPECT_EQ(error_of(v, logp, ok_t, ok_s), "");
    EXPECT_NE(error_of(v, logp, torch::tensor({40, 30, 5}), ok_s).find("item 1"), std::string::npos);
    EXPECT_NE(error_of(v, logp, torch::tensor({40, 10, 0}), ok_s).find("item 2"), std::string::npos);
    EXPECT_NE(error_of(v, logp, ok_t, torch::tensor({301, 20, 5})).find("exceed"), std::string::npos);
    torch::Tensor bad = logp.clone();
    bad[1][0][15] = INFINITY;  // outside item 1's band (row 0 spans columns 0..10)
    bad[2][4][4] = -INFINITY;  // row 4 spans only column 4 when T = S = 5: inside
    EXPECT_NE(error_of(v, bad, ok_t, ok_s).find("item 2"), std::string::npos);
    bad[2][4][4] = 0.0f;
    EXPECT_EQ(error_of(v, bad, ok_t, ok_s), "");
    bad[0][39][299] = NAN;  // the last cell
    EXPECT_NE(error_of(v, bad, ok_t, ok_s).find("item 0"), std::string::npos);
  }
}

}  // namespace
}  // namespace monoflow::align
