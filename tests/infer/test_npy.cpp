// encode_npy_float32 (infer/npy.h): the format-1.0 header byte for byte, and numpy's own
// np.load reading the values back where the configured Python has numpy.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "test_util.h"
#include "infer/npy.h"

namespace monoflow::train {
namespace {

TEST(Npy, HeaderIsFormatOneAndAlignedTo64Bytes) {
  const auto t = torch::arange(6, torch::kFloat32).view({2, 3});
  const std::string bytes = encode_npy_float32(t);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), std::string("\x93NUMPY", 6));
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  const size_t header = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header) % 64, 0u);
  const std::string dict = bytes.substr(10, header);
  EXPECT_NE(dict.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(dict.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_EQ(dict.back(), '\n');
  ASSERT_EQ(bytes.size(), 10 + header + 6 * sizeof(float));
  float values[6];
  std::memcpy(values, bytes.data() + 10 + header, sizeof values);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], static_cast<float>(i));
  EXPECT_NE(encode_npy_float32(torch::ones({5})).find("'shape': (5,)"), std::string::npos);
}

TEST(Npy, NumpyLoadsTheValues) {
  const std::string python = MONOFLOW_TEST_PYTHON;
  if (python.empty() || std::system((python + " -c 'import numpy' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no Python with numpy";
  }
  testing::TempDir dir;
  const auto t = torch::randn({80, 37});
  std::ofstream(dir / "mel.npy", std::ios::binary) << encode_npy_float32(t);
  int status = 0;
  const std::string out = testing::run_command(
      python + " -c \"import numpy as n; a = n.load('" + (dir / "mel.npy") +
      "'); print(a.shape, a.dtype, float(a.sum()), float(a[3, 5]))\"", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("(80, 37) float32"), std::string::npos) << out;
  const double sum = std::atof(out.substr(out.find("float32") + 8).c_str());
  EXPECT_NEAR(sum, t.sum().item<double>(), 1e-2);
  const double element = std::atof(out.substr(out.rfind(' ') + 1).c_str());
  EXPECT_NEAR(element, t[3][5].item<double>(), 1e-6);
}

}  // namespace
}  // namespace monoflow::train
