// The bias gradients' column sums (models/cuda_dispatch.h: column_sums, kernels/column_sums.cu)
// against a float64 sum on the host, in every kernel dtype, across the kernel's block boundaries,
// packed and unpacked; deterministic; not rounded to the rows' dtype. GPU only: skipped without a
// device, and not built without CUDA.
#include <gtest/gtest.h>
#include <torch/torch.h>

#ifdef MONOFLOW_HAS_CUDA
#include "models/cuda_dispatch.h"
#include "models/kernels/column_sums_kernels.h"
#endif

namespace monoflow::models {
namespace {

#ifdef MONOFLOW_HAS_CUDA

class ColumnSumsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// The exact sum of the rows as given (their dtype's values), in float64 on the host.
torch::Tensor host_sums(const torch::Tensor& rows) { return rows.cpu().to(torch::kDouble).sum(0); }

double max_rel_error(const torch::Tensor& got, const torch::Tensor& want) {
  const auto w = want.cpu().to(torch::kDouble);
  const auto scale = w.abs().clamp_min(1.0);
  return ((got.cpu().to(torch::kDouble) - w).abs() / scale).max().item<double>();
}

TEST_F(ColumnSumsCuda, MatchTheHostSumAcrossBlocksPacksAndDtypes) {
  torch::manual_seed(5);
  const int64_t b = kernels::kColumnSumRows;
  // Rows: none, one, a block and its neighbours, several blocks, the decoder's B * T. Columns:
  // one, odd (unpacked), the coupling's 80, the WN layers' 192 and 384, and 1,000 (packed only).
  for (const int64_t n : {int64_t{0}, int64_t{1}, b - 1, b, b + 1, 5 * b + 3, int64_t{25'600}}) {
    for (const int64_t c : {1, 3, 80, 192, 384, 1000}) {
      for (const auto dtype : {torch::kFloat, torch::kHalf, torch::kBFloat16}) {
        const auto rows = torch::randn({n, c}, torch::kCUDA).to(dtype);
        const auto sums = cuda::column_sums(rows, torch::kFloat);
        ASSERT_EQ(sums.scalar_type(), torch::kFloat);
        ASSERT_EQ(sums.sizes(), torch::IntArrayRef({c}));
        // Float accumulation of n terms of magnitude ~1: a few ulp of float per term at most.
        EXPECT_LT(max_rel_error(sums, host_sums(rows)), 1e-5 + 1e-7 * n)
            << "n " << n << " c " << c << " dtype " << dtype;
      }
    }
  }
}

// A view starting one element in is not 16-byte aligned: the unpacked kernel (C <= 256) or the
// torch fallback (C > 256) must give the same sums as the packed kernel within float rounding.
TEST_F(ColumnSumsCuda, UnalignedRowsTakeTheUnpackedPath) {
  torch::manual_seed(6);
  for (const int64_t c : {192, 384}) {
    const auto storage = torch::randn({1000 * c + 1}, torch::kCUDA).to(torch::kBFloat16);
    const auto rows = storage.slice(0, 1).view({1000, c});
    EXPECT_LT(max_rel_error(cuda::column_sums(rows, torch::kFloat), host_sums(rows)), 1e-4) << "c " << c;
  }
}

TEST_F(ColumnSumsCuda, AreDeterministicAndNotRoundedToTheRowsDtype) {
  torch::manual_seed(7);
  // Rows whose column sums need more than bf16's 8 significant bits: 1 + k / 256 summed 3,000
  // times. A sum rounded to bf16 is off by up to 2^-9 of itself; float keeps it to ~1e-6.
  const int64_t n = 3000, c = 384;
  const auto rows = (1.0 + torch::randint(0, 8, {n, c}, torch::kCUDA) / 256.0).to(torch::kBFloat16);
  const auto first = cuda::column_sums(rows, torch::kFloat), second = cuda::column_sums(rows, torch::kFloat);
  EXPECT_TRUE(torch::equal(first, second));
  EXPECT_LT(max_rel_error(first, host_sums(rows)), 1e-6);
  // And the bias's dtype comes back as asked.
  EXPECT_EQ(cuda::column_sums(rows, torch::kBFloat16).scalar_type(), torch::kBFloat16);
}

// channel_sums_channels_last: a channels-last [B, C, T] gradient summed over B and T.
TEST_F(ColumnSumsCuda, ChannelSumsOfAChannelsLastTensor) {
  torch::manual_seed(8);
  const auto x = torch::randn({4, 300, 96}, torch::kCUDA).transpose(1, 2).contiguous().transpose(1, 2);
  ASSERT_EQ(x.stride(1), 1);
  const auto want = x.cpu().to(torch::kDouble).sum(at::IntArrayRef{0, 2});
  EXPECT_LT(max_rel_error(cuda::channel_sums_channels_last(x, torch::kFloat), want), 1e-5);
}

#endif  // MONOFLOW_HAS_CUDA

}  // namespace
}  // namespace monoflow::models
