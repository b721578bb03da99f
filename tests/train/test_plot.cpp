// Plots with axes (train/log/plot.h): the heatmap's pixels where the layout says, the colour
// bar's ends, tick labels in the margins, and the 1-2-5 ticks.
#include <gtest/gtest.h>

#include <array>

#include "train/log/plot.h"

namespace monoflow::train {
namespace {

bool same_colour(const uint8_t* a, const uint8_t* b) { return a[0] == b[0] && a[1] == b[1] && a[2] == b[2]; }

std::array<uint8_t, 3> palette(float t) {
  std::array<uint8_t, 3> rgb{};
  palette_colour(t, rgb.data());
  return rgb;
}

// Dark pixels (text, ticks) inside [x0, x1) x [y0, y1).
int ink_in(const Rgb& img, int x0, int y0, int x1, int y1) {
  int n = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) n += img.at(x, y)[0] < 64 && img.at(x, y)[1] < 64 && img.at(x, y)[2] < 64;
  }
  return n;
}

TEST(Plot, TicksAreOneTwoFiveStepsFromZero) {
  EXPECT_EQ(axis_ticks(1, 5), (std::vector<int64_t>{0}));
  EXPECT_EQ(axis_ticks(6, 5), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(axis_ticks(11, 5), (std::vector<int64_t>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(axis_ticks(801, 8), (std::vector<int64_t>{0, 100, 200, 300, 400, 500, 600, 700, 800}));
  EXPECT_EQ(axis_ticks(250, 3), (std::vector<int64_t>{0, 100, 200}));
  EXPECT_TRUE(axis_ticks(0, 5).empty());
}

TEST(Plot, HeatmapColourBarAndLabelsWhereTheLayoutSays) {
  // 3 tokens x 200 frames: a ramp over frames, plus the maximum at token 2, frame 150
  auto v = torch::arange(200, torch::kFloat).repeat({3, 1}) / 1000.0;
  v[2][150] = 5.0f;
  PlotLayout l;
  const Rgb img = render_plot_rgb(v, PlotLabels{"frame", "token", 60}, &l);
  ASSERT_EQ(l.map_width, 200);
  ASSERT_EQ(l.map_height, 60);  // 3 rows, each repeated 20 times
  EXPECT_GT(img.width, l.map_left + l.map_width + l.bar_width);
  EXPECT_GT(img.height, l.map_top + l.map_height);
  // row 0 at the bottom: token 2's maximum lies in the top 20 pixel rows, at column 150
  const auto top = palette(1.0f), low = palette(0.0f);
  EXPECT_TRUE(same_colour(img.at(l.map_left + 150, l.map_top + 5), top.data()));
  EXPECT_FALSE(same_colour(img.at(l.map_left + 150, l.map_top + l.map_height - 5), top.data()));
  EXPECT_TRUE(same_colour(img.at(l.map_left, l.map_top + l.map_height - 1), low.data()));  // the minimum, 0
  // the colour bar: the high end at the top, the low end at the bottom
  EXPECT_TRUE(same_colour(img.at(l.bar_left + 3, l.map_top), top.data()));
  EXPECT_TRUE(same_colour(img.at(l.bar_left + 3, l.map_top + l.map_height - 1), low.data()));
  // tick labels and axis names in the margins; paper elsewhere in them
  EXPECT_GT(ink_in(img, l.map_left, l.map_top + l.map_height + 4, l.map_left + l.map_width, img.height), 20);
  EXPECT_GT(ink_in(img, 0, l.map_top, l.map_left - 4, l.map_top + l.map_height), 10);
  EXPECT_GT(ink_in(img, 0, 0, 40, l.map_top), 5);                                      // "token"
  EXPECT_GT(ink_in(img, l.bar_left + l.bar_width, l.map_top, img.width, l.map_top + 10), 5);  // "5.00"
  const uint8_t paper[3] = {255, 255, 255};
  EXPECT_TRUE(same_colour(img.at(img.width - 1, img.height - 1), paper));
}

TEST(Plot, PngHasThePlotsSize) {
  const auto v = torch::rand({80, 120});
  const Rgb img = render_plot_rgb(v, PlotLabels{"frame", "mel channel", 0});
  const Png png = render_plot(v, PlotLabels{"frame", "mel channel", 0});
  EXPECT_EQ(png.width, img.width);
  EXPECT_EQ(png.height, img.height);
  EXPECT_EQ(png.bytes.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace monoflow::train
