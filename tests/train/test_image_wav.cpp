#include <gtest/gtest.h>

#include <cstring>

#include "common/error.h"
#include "test_util.h"
#include "train/log/image.h"
#include "train/wav.h"

namespace monoflow::train {
namespace {

uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}
uint32_t le(const std::string& s, size_t at, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[at + i]);
  return v;
}

TEST(Image, HeatmapIsAPngOfTheTensorsSize) {
  const Png png = render_heatmap(torch::rand({7, 13}));
  ASSERT_GT(png.bytes.size(), 33u);
  EXPECT_EQ(png.bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(be32(png.bytes, 16), 13u);  // width
  EXPECT_EQ(be32(png.bytes, 20), 7u);   // height
  EXPECT_EQ(png.width, 13);
  EXPECT_EQ(png.height, 7);
}

TEST(Image, ShortHeatmapsRepeatRowsToTheMinimumHeight) {
  const torch::Tensor path = torch::eye(3);
  const Png png = render_heatmap(path, 10);  // 3 rows repeated 4 times: 12 >= 10
  EXPECT_EQ(png.height, 12);
  EXPECT_EQ(png.width, 3);
  EXPECT_EQ(render_heatmap(torch::rand({20, 4}), 10).height, 20);
}

TEST(Image, StackedHasBothHeightsPlusASeparator) {
  const Png png = render_stacked(torch::rand({80, 50}), torch::rand({80, 40}));
  EXPECT_EQ(png.height, 161);
  EXPECT_EQ(png.width, 50);
  EXPECT_EQ(be32(png.bytes, 20), 161u);
}

TEST(Image, WriteFileToAMissingFolderNamesIt) {
  try {
    write_file("/nonexistent-folder-xyz/a.png", "x");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), "/nonexistent-folder-xyz/a.png");
  }
}

TEST(Wav, HeaderAndSamples) {
  const torch::Tensor x = torch::tensor({0.0f, 0.5f, -1.0f, 2.0f});
  const std::string w = encode_wav16(x, 16000);
  ASSERT_EQ(w.size(), 44u + 8u);
  EXPECT_EQ(w.substr(0, 4), "RIFF");
  EXPECT_EQ(le(w, 4, 4), 36u + 8u);
  EXPECT_EQ(w.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(le(w, 20, 2), 1u);      // PCM
  EXPECT_EQ(le(w, 22, 2), 1u);      // mono
  EXPECT_EQ(le(w, 24, 4), 16000u);  // rate
  EXPECT_EQ(le(w, 34, 2), 16u);     // bits
  EXPECT_EQ(w.substr(36, 4), "data");
  EXPECT_EQ(le(w, 40, 4), 8u);
  EXPECT_EQ(int16_t(le(w, 44, 2)), 0);
  EXPECT_EQ(int16_t(le(w, 46, 2)), 16384);   // round(0.5 * 32767)
  EXPECT_EQ(int16_t(le(w, 48, 2)), -32767);
  EXPECT_EQ(int16_t(le(w, 50, 2)), 32767);   // clipped
}

}  // namespace
}  // namespace monoflow::train
