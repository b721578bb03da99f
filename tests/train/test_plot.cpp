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

// Ink on the picture's outermost rows and columns: a label that ran past the edge was cut.
int ink_on_border(const Rgb& img) {
  return ink_in(img, 0, 0, img.width, 1) + ink_in(img, 0, img.height - 1, img.width, img.height) +
         ink_in(img, 0, 0, 1, img.height) + ink_in(img, img.width - 1, 0, img.width, img.height);
}

// "200" was drawn as "20(": the font's vertex buffer held ~270 bytes a character and dropped
// the quads past it. A text drawn whole equals its characters drawn one by one at their advances.
TEST(Plot, ALabelIsDrawnToItsFullWidth) {
  for (const std::string text : {"200", "1000", "mel channel", "-12.34", "8.88888888"}) {
    SCOPED_TRACE(text);
    Rgb whole, pieces;
    whole.width = pieces.width = text_width(text) + 4;
    whole.height = pieces.height = 14;
    whole.bytes.assign(static_cast<size_t>(whole.width) * whole.height * 3, 255);
    pieces.bytes = whole.bytes;
    draw_text(whole, 1, 2, text);
    for (size_t i = 0; i < text.size(); ++i) draw_text(pieces, 1 + text_width(text.substr(0, i)), 2, text.substr(i, 1));
    EXPECT_EQ(whole.bytes, pieces.bytes);
    // and the last character has ink in its own cell, right of the ones before it
    const int last_cell = 1 + text_width(text.substr(0, text.size() - 1));
    EXPECT_GT(ink_in(whole, last_cell, 0, whole.width, whole.height), 3);
  }
}

// Margins follow their labels: no tick label, value, axis name or title is cut at an edge,
// whatever the counts of rows and columns, the value range and the title.
TEST(Plot, NoLabelIsCutAtThePicturesEdge) {
  struct Case {
    int64_t rows, cols;
    float scale;
    PlotLabels labels;
  };
  const std::vector<Case> cases{
      {3, 201, 1.f, {"frame", "token", 240, ""}},
      {3, 1001, 1.f, {"frame", "token", 240, "MAS alignment (mfc-0001, training step 1000)"}},
      {250, 40, -12345.f, {"frame", "token", 0, ""}},
      {80, 5, 1.f, {"frame", "mel channel", 0, "a title much wider than this narrow plot is"}},
      {1200, 3, 0.001f, {"frame", "token", 0, ""}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + c.labels.title);
    const auto v = torch::rand({c.rows, c.cols}) * c.scale;
    PlotLayout l;
    const Rgb img = render_plot_rgb(v, c.labels, &l);
    EXPECT_EQ(ink_on_border(img), 0);
    if (!c.labels.title.empty()) {
      EXPECT_GE(img.width, text_width(c.labels.title) + 2);
      EXPECT_GT(ink_in(img, 0, 0, img.width, 12), 20);  // the title's line
    }
  }
}

// The trainer's val_mel picture: target over generated mel, each a full plot with its title,
// on one colour scale (the generated one's maximum is the top of both colour bars).
TEST(Plot, PanelsStackFullPlotsOnOneScale) {
  const auto target = torch::zeros({80, 120});
  auto generated = torch::zeros({80, 90});
  generated[40][45] = 2.0f;
  std::vector<PlotLayout> layouts;
  const Rgb img = render_panels_rgb({{target, "target mel"}, {generated, "generated mel"}},
                                    PlotLabels{"frame", "mel channel", 0, ""}, &layouts);
  ASSERT_EQ(layouts.size(), 2u);
  EXPECT_EQ(layouts[0].map_width, 120);
  EXPECT_EQ(layouts[1].map_width, 90);
  EXPECT_GT(layouts[1].map_top, layouts[0].map_top + layouts[0].map_height + 20);  // axes and a title between
  EXPECT_EQ(ink_on_border(img), 0);
  const auto low = palette(0.0f), top = palette(1.0f);
  // the target is all zeros: the low end of the joint scale, not the middle of its own
  EXPECT_TRUE(same_colour(img.at(layouts[0].map_left + 10, layouts[0].map_top + 10), low.data()));
  EXPECT_TRUE(same_colour(img.at(layouts[1].map_left + 45, layouts[1].map_top + 79 - 40), top.data()));
  for (const auto& l : layouts) {
    EXPECT_TRUE(same_colour(img.at(l.bar_left + 3, l.map_top), top.data()));
    // a title line and the axis name above each heatmap
    EXPECT_GT(ink_in(img, 0, l.map_top - 26, img.width, l.map_top - 14), 20);
    EXPECT_GT(ink_in(img, 0, l.map_top - 14, img.width, l.map_top - 2), 20);
  }
  const Png png = render_panels({{target, "target mel"}, {generated, "generated mel"}}, PlotLabels{});
  EXPECT_EQ(png.bytes.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace monoflow::train
