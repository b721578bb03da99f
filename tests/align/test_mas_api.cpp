// Backend names and the errors a caller can cause.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "align/mas.h"
#include "common/error.h"

namespace monoflow::align {
namespace {

TEST(MasApi, BackendNamesRoundTrip) {
  for (Backend b : {Backend::kCpu, Backend::kCuda, Backend::kCudaFast}) {
    EXPECT_EQ(parse_backend(backend_name(b)), b);
  }
  EXPECT_THROW(parse_backend("gpu"), UserError);
  EXPECT_TRUE(backend_available(Backend::kCpu));
}

// The message of the UserError that maximum_path throws, or "" when it does not throw.
std::string error_of(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                     const torch::Tensor& mel_lengths, MasOptions options = {}) {
  try {
    maximum_path(logp, text_lengths, mel_lengths, options);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(MasApi, RejectsBadShapesAndDtypes) {
  const auto t = torch::tensor({2}), s = torch::tensor({3});
  EXPECT_NE(error_of(torch::zeros({2, 3}), t, s).find("[B, T_text, T_mel]"), std::string::npos);
  EXPECT_NE(error_of(torch::zeros({1, 2, 3}, torch::kInt32), t, s).find("float32"),
            std::string::npos);
  EXPECT_NE(error_of(torch::zeros({1, 2, 3}), torch::tensor({2, 2}), s).find("text_lengths"),
            std::string::npos);
  EXPECT_NE(error_of(torch::zeros({1, 2, 3}), t, torch::tensor({3.0})).find("mel_lengths"),
            std::string::npos);
  MasOptions neither;
  neither.want_path = neither.want_durations = false;
  EXPECT_NE(error_of(torch::zeros({1, 2, 3}), t, s, neither).find("neither"), std::string::npos);
  MasOptions bad_dtype;
  bad_dtype.path_dtype = torch::kComplexFloat;
  EXPECT_NE(error_of(torch::zeros({1, 2, 3}), t, s, bad_dtype).find("path dtype"),
            std::string::npos);
}

TEST(MasApi, RejectsBadLengths) {
  const auto logp = torch::zeros({2, 4, 6});
  EXPECT_NE(error_of(logp, torch::tensor({4, 0}), torch::tensor({6, 6})).find("item 1"),
            std::string::npos);
  EXPECT_NE(error_of(logp, torch::tensor({4, 4}), torch::tensor({0, 6})).find("at least 1"),
            std::string::npos);
  EXPECT_NE(error_of(logp, torch::tensor({4, 4}), torch::tensor({6, 3})).find("more text"),
            std::string::npos);
  EXPECT_NE(error_of(logp, torch::tensor({5, 4}), torch::tensor({6, 6})).find("exceed"),
            std::string::npos);
  EXPECT_NE(error_of(logp, torch::tensor({4, 4}), torch::tensor({6, 7})).find("exceed"),
            std::string::npos);
}

TEST(MasApi, RejectsNonFiniteValuesInsideTheBandOnly) {
  torch::Tensor logp = torch::zeros({2, 3, 5});
  logp[1][0][4] = INFINITY;  // outside the band (row 0 spans columns 0..2): ignored
  logp[1][2][0] = NAN;       // outside the band too
  EXPECT_EQ(error_of(logp.clone(), torch::tensor({3, 3}), torch::tensor({5, 5})), "");
  logp[1][1][2] = NAN;  // inside
  EXPECT_NE(error_of(logp.clone(), torch::tensor({3, 3}), torch::tensor({5, 5})).find("item 1"),
            std::string::npos);
}

TEST(MasApi, CudaBackendsNeedAGpuTensor) {
  for (Backend b : {Backend::kCuda, Backend::kCudaFast}) {
    MasOptions o;
    o.backend = b;
    const std::string e = error_of(torch::zeros({1, 2, 3}), torch::tensor({2}), torch::tensor({3}), o);
    if (backend_available(b)) {
      EXPECT_NE(e.find("CUDA device"), std::string::npos) << e;
    } else {
      EXPECT_NE(e.find("not available"), std::string::npos) << e;
    }
  }
}

}  // namespace
}  // namespace monoflow::align
