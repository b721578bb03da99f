// The cpu backend against an independent brute-force MAS, plus its exact special cases.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "align/mas.h"
#include "mas_test_util.h"

namespace monoflow::align {
namespace {

using testing::brute_force_rows;
using testing::random_batch;

MasOptions cpu_options() {
  MasOptions o;
  o.backend = Backend::kCpu;
  return o;
}

// Text index of every frame of item b, read off the dense path.
std::vector<int> path_rows(const torch::Tensor& path, int64_t b, int64_t mel_len) {
  std::vector<int> rows;
  auto p = path[b].argmax(0);
  for (int64_t y = 0; y < mel_len; ++y) rows.push_back(static_cast<int>(p[y].item<int64_t>()));
  return rows;
}

void expect_brute_force_agreement(bool exact, uint64_t seed, int cases) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (int c = 0; c < cases; ++c) {
    const int64_t max_text = 1 + c % 5;
    const int64_t max_mel = max_text + (c / 5) % 5;
    auto in = random_batch(4, max_text, max_mel, exact, gen);
    const torch::Tensor reference_logp = in.logp.clone();
    MasResult r = maximum_path(in.logp, in.text_lengths, in.mel_lengths, cpu_options());
    for (int64_t b = 0; b < 4; ++b) {
      const int t = in.text_lengths[b].item<int>(), s = in.mel_lengths[b].item<int>();
      SCOPED_TRACE("case " + std::to_string(c) + " item " + std::to_string(b) + " T=" +
                   std::to_string(t) + " S=" + std::to_string(s));
      testing::expect_valid_path(r.path[b], r.durations[b], t, s, b);
      EXPECT_EQ(path_rows(r.path, b, s), brute_force_rows(reference_logp[b], t, s));
    }
  }
}

TEST(MasCpu, AgreesWithBruteForceOnTiedValues) { expect_brute_force_agreement(true, 7, 400); }

TEST(MasCpu, AgreesWithBruteForceOnGaussianValues) { expect_brute_force_agreement(false, 8, 200); }

TEST(MasCpu, AllTiesStayOnTheLastTokens) {
  // With every score equal, backtracking stays on a token as long as the band allows, so
  // the first tokens get one frame each and the last token the rest.
  torch::Tensor logp = torch::zeros({1, 4, 9});
  MasResult r = maximum_path(logp, torch::tensor({4}), torch::tensor({9}), cpu_options());
  EXPECT_TRUE(torch::equal(r.durations, torch::tensor({{1, 1, 1, 6}}, torch::kInt32)));
}

TEST(MasCpu, DiagonalWhenTextEqualsMel) {
  torch::Tensor logp = torch::randn({1, 6, 6});
  MasResult r = maximum_path(logp, torch::tensor({6}), torch::tensor({6}), cpu_options());
  EXPECT_TRUE(torch::equal(r.path[0], torch::eye(6)));
}

TEST(MasCpu, SingleTokenTakesEveryFrame) {
  torch::Tensor logp = torch::randn({2, 3, 7});
  MasResult r = maximum_path(logp, torch::tensor({1, 1}), torch::tensor({7, 4}), cpu_options());
  EXPECT_TRUE(torch::equal(r.durations, torch::tensor({{7, 0, 0}, {4, 0, 0}}, torch::kInt32)));
}

TEST(MasCpu, FollowsAStrongDiagonalSignal) {
  // Token x is the only good match for frames [3x, 3x+3).
  torch::Tensor logp = torch::full({1, 5, 15}, -5.0f);
  for (int x = 0; x < 5; ++x) logp[0][x].slice(0, 3 * x, 3 * x + 3).fill_(0.0f);
  MasResult r = maximum_path(logp, torch::tensor({5}), torch::tensor({15}), cpu_options());
  EXPECT_TRUE(torch::equal(r.durations, torch::full({1, 5}, 3, torch::kInt32)));
}

TEST(MasCpu, InvariantsHoldOnLargerPaddedBatches) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  auto in = random_batch(6, 70, 300, false, gen);
  MasResult r = maximum_path(in.logp, in.text_lengths, in.mel_lengths, cpu_options());
  for (int64_t b = 0; b < 6; ++b) {
    testing::expect_valid_path(r.path[b], r.durations[b], in.text_lengths[b].item<int64_t>(),
                               in.mel_lengths[b].item<int64_t>(), b);
  }
}

TEST(MasCpu, NegInfIsConfigurable) {
  // Cumulative scores far below -1e9: the original stand-in (-1e9) then beats real paths
  // on the band's edge and changes the alignment; the default (-1e32) matches brute force.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  int differing = 0;
  for (int c = 0; c < 50; ++c) {
    torch::Tensor logp = -torch::randint(1, 9, {1, 4, 8}, gen, torch::kFloat32) * 268435456.0;
    const torch::Tensor reference = logp.clone();
    MasOptions o = cpu_options();
    o.keep_input = true;
    MasResult exact = maximum_path(logp, torch::tensor({4}), torch::tensor({8}), o);
    o.neg_inf = -1e9f;
    MasResult old = maximum_path(logp, torch::tensor({4}), torch::tensor({8}), o);
    EXPECT_EQ(path_rows(exact.path, 0, 8), brute_force_rows(reference[0], 4, 8));
    differing += !torch::equal(exact.path, old.path);
  }
  EXPECT_GT(differing, 0);
}

TEST(MasCpu, PathDtypesAgree) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto in = random_batch(3, 9, 20, false, gen);
  MasOptions o = cpu_options();
  o.keep_input = true;
  const torch::Tensor reference = maximum_path(in.logp, in.text_lengths, in.mel_lengths, o).path;
  for (auto dtype : {torch::kBool, torch::kUInt8, torch::kInt32, torch::kInt64, torch::kFloat16,
                     torch::kBFloat16, torch::kFloat64}) {
    o.path_dtype = dtype;
    MasResult r = maximum_path(in.logp, in.text_lengths, in.mel_lengths, o);
    EXPECT_EQ(r.path.scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(r.path.to(torch::kFloat32), reference)) << c10::toString(dtype);
  }
}

TEST(MasCpu, KeepInputLeavesLogpIntact) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  auto in = random_batch(2, 5, 12, false, gen, /*full_lengths=*/true);
  const torch::Tensor before = in.logp.clone();
  MasOptions o = cpu_options();
  o.keep_input = true;
  maximum_path(in.logp, in.text_lengths, in.mel_lengths, o);
  EXPECT_TRUE(torch::equal(in.logp, before));
  o.keep_input = false;  // float32 on the host: worked on in place
  maximum_path(in.logp, in.text_lengths, in.mel_lengths, o);
  EXPECT_FALSE(torch::equal(in.logp, before));
}

TEST(MasCpu, HalfPrecisionInputIsComputedInFloat32) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(6);
  auto in = random_batch(3, 12, 40, false, gen, /*full_lengths=*/true);
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    const torch::Tensor low = in.logp.to(dtype);
    MasResult r = maximum_path(low, in.text_lengths, in.mel_lengths, cpu_options());
    MasResult ref = maximum_path(low.to(torch::kFloat32), in.text_lengths, in.mel_lengths,
                                 cpu_options());
    EXPECT_TRUE(torch::equal(r.path, ref.path));
    EXPECT_TRUE(torch::equal(r.durations, ref.durations));
  }
}

TEST(MasCpu, DurationsOnlyOrPathOnly) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  auto in = random_batch(2, 6, 15, false, gen);
  MasOptions o = cpu_options();
  o.keep_input = true;
  const MasResult both = maximum_path(in.logp, in.text_lengths, in.mel_lengths, o);
  o.want_path = false;
  MasResult d = maximum_path(in.logp, in.text_lengths, in.mel_lengths, o);
  EXPECT_FALSE(d.path.defined());
  EXPECT_TRUE(torch::equal(d.durations, both.durations));
  o.want_path = true;
  o.want_durations = false;
  MasResult p = maximum_path(in.logp, in.text_lengths, in.mel_lengths, o);
  EXPECT_FALSE(p.durations.defined());
  EXPECT_TRUE(torch::equal(p.path, both.path));
}

}  // namespace
}  // namespace monoflow::align
