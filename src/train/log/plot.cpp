#include "train/log/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "stb_easy_font.h"

namespace monoflow::train {
namespace {

constexpr int kLeft = 44, kTop = 16, kBottom = 30, kBarGap = 8, kBarWidth = 12, kRight = 56;
constexpr int kTick = 3;
constexpr uint8_t kInk = 0, kPaper = 255;

// stb_easy_font draws text as axis-aligned quads (4 vertices of 16 bytes each); fill them.
void draw_text(Rgb& img, int x, int y, const std::string& text) {
  std::vector<char> vertices(270 * (text.size() + 1) + 64);
  std::string copy = text;
  const int quads = stb_easy_font_print(static_cast<float>(x), static_cast<float>(y), copy.data(), nullptr,
                                        vertices.data(), static_cast<int>(vertices.size()));
  for (int q = 0; q < quads; ++q) {
    const float* v0 = reinterpret_cast<const float*>(vertices.data() + q * 64);
    const float* v2 = reinterpret_cast<const float*>(vertices.data() + q * 64 + 32);
    const int x0 = std::max(0, static_cast<int>(v0[0])), y0 = std::max(0, static_cast<int>(v0[1]));
    const int x1 = std::min(img.width, static_cast<int>(v2[0])), y1 = std::min(img.height, static_cast<int>(v2[1]));
    for (int yy = y0; yy < y1; ++yy) {
      for (int xx = x0; xx < x1; ++xx) std::fill_n(&img.bytes[(static_cast<size_t>(yy) * img.width + xx) * 3], 3, kInk);
    }
  }
}

int text_width(const std::string& text) {
  std::string copy = text;
  return stb_easy_font_width(copy.data());
}

void fill_rect(Rgb& img, int x0, int y0, int x1, int y1, uint8_t value) {
  for (int y = std::max(0, y0); y < std::min(img.height, y1); ++y) {
    for (int x = std::max(0, x0); x < std::min(img.width, x1); ++x) {
      std::fill_n(&img.bytes[(static_cast<size_t>(y) * img.width + x) * 3], 3, value);
    }
  }
}

std::string format_value(float v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, std::fabs(v) >= 1000 || (v != 0 && std::fabs(v) < 0.01) ? "%.2g" : "%.2f", v);
  return buffer;
}

}  // namespace

std::vector<int64_t> axis_ticks(int64_t count, int max_ticks) {
  std::vector<int64_t> ticks;
  if (count <= 0) return ticks;
  const int64_t last = count - 1;
  // the smallest 1-2-5 step that leaves at most max_ticks intervals
  auto step_for = [&]() -> int64_t {
    for (int64_t decade = 1;; decade *= 10) {
      for (int64_t m : {1, 2, 5}) {
        if (last / (m * decade) <= std::max(1, max_ticks)) return m * decade;
      }
    }
  };
  const int64_t step = step_for();
  for (int64_t t = 0; t <= last; t += step) ticks.push_back(t);
  return ticks;
}

Rgb render_plot_rgb(const torch::Tensor& values, const PlotLabels& labels, PlotLayout* layout) {
  TORCH_CHECK(values.dim() == 2, "plots take 2-D tensors, got ", values.sizes());
  const torch::Tensor v = values.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  const int rows = static_cast<int>(v.size(0)), cols = static_cast<int>(v.size(1));
  const int repeat = rows > 0 && rows < labels.min_height ? (labels.min_height + rows - 1) / rows : 1;
  const int map_h = rows * repeat, map_w = cols;
  const float lo = v.numel() ? v.min().item<float>() : 0.f, hi = v.numel() ? v.max().item<float>() : 0.f;
  const float span = hi > lo ? hi - lo : 1.f;

  Rgb img;
  img.width = kLeft + map_w + kBarGap + kBarWidth + kRight;
  img.height = kTop + std::max(map_h, 24) + kBottom;
  img.bytes.assign(static_cast<size_t>(img.width) * img.height * 3, kPaper);
  PlotLayout l{kLeft, kTop, map_w, map_h, kLeft + map_w + kBarGap, kBarWidth};

  // the heatmap, row 0 at the bottom
  const auto a = v.accessor<float, 2>();
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < repeat; ++k) {
      const int y = l.map_top + map_h - 1 - (r * repeat + k);
      for (int x = 0; x < cols; ++x) palette_colour((a[r][x] - lo) / span, &img.bytes[(static_cast<size_t>(y) * img.width + l.map_left + x) * 3]);
    }
  }
  // the frame's left and bottom edges, with ticks and their values
  const int bottom = l.map_top + map_h;
  fill_rect(img, l.map_left - 1, l.map_top, l.map_left, bottom + 1, kInk);
  fill_rect(img, l.map_left - 1, bottom, l.map_left + map_w, bottom + 1, kInk);
  for (int64_t t : axis_ticks(cols, std::max(1, map_w / 60))) {
    const int x = l.map_left + static_cast<int>(t);
    fill_rect(img, x, bottom, x + 1, bottom + kTick + 1, kInk);
    const std::string s = std::to_string(t);
    draw_text(img, x - text_width(s) / 2, bottom + kTick + 2, s);
  }
  for (int64_t t : axis_ticks(rows, std::max(1, map_h / 20))) {
    const int y = bottom - 1 - static_cast<int>(t) * repeat - repeat / 2;
    fill_rect(img, l.map_left - 1 - kTick, y, l.map_left - 1, y + 1, kInk);
    const std::string s = std::to_string(t);
    draw_text(img, l.map_left - kTick - 3 - text_width(s), y - 4, s);
  }
  draw_text(img, l.map_left + map_w - text_width(labels.x), bottom + kTick + 14, labels.x);
  draw_text(img, 2, 2, labels.y);
  // the colour bar: high at the top, with the range's ends
  for (int y = 0; y < map_h; ++y) {
    const float t = map_h > 1 ? 1.f - static_cast<float>(y) / (map_h - 1) : 1.f;
    for (int x = 0; x < l.bar_width; ++x) palette_colour(t, &img.bytes[(static_cast<size_t>(l.map_top + y) * img.width + l.bar_left + x) * 3]);
  }
  draw_text(img, l.bar_left + l.bar_width + 3, l.map_top, format_value(hi));
  draw_text(img, l.bar_left + l.bar_width + 3, bottom - 8, format_value(lo));
  if (layout) *layout = l;
  return img;
}

Png render_plot(const torch::Tensor& values, const PlotLabels& labels) {
  const Rgb img = render_plot_rgb(values, labels);
  return {encode_png(img.bytes.data(), img.width, img.height, 3), img.height, img.width, 3};
}

}  // namespace monoflow::train
