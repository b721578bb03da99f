#include "train/log/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "stb_easy_font.h"

namespace monoflow::train {
namespace {

constexpr int kLine = 12;       // a line of text: glyphs 7-9 pixels tall, descenders included
constexpr int kPad = 3;         // paper between a label and the picture's edge or its neighbour
constexpr int kBarGap = 8, kBarWidth = 12, kTick = 3;
constexpr int kPanelGap = 6;    // paper between stacked panels
constexpr uint8_t kInk = 0, kPaper = 255;

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

// Where each part of one plot goes: margins from the widths of the labels they hold.
struct Frame {
  PlotLayout l;
  int width = 0, height = 0, repeat = 1, title_top = 0, y_name_top = 0;
  std::vector<int64_t> x_ticks, y_ticks;
  std::string hi_text, lo_text;
};

Frame frame_for(int rows, int cols, const PlotLabels& labels, float lo, float hi) {
  Frame f;
  f.repeat = rows > 0 && rows < labels.min_height ? (labels.min_height + rows - 1) / rows : 1;
  const int map_h = rows * f.repeat, map_w = cols;
  f.x_ticks = axis_ticks(cols, std::max(1, map_w / 60));
  f.y_ticks = axis_ticks(rows, std::max(1, map_h / 20));
  f.hi_text = format_value(hi);
  f.lo_text = format_value(lo);
  int widest_y_tick = 0;
  for (int64_t t : f.y_ticks) widest_y_tick = std::max(widest_y_tick, text_width(std::to_string(t)));
  const int first_x_half = text_width("0") / 2 + 1;
  const int left = std::max({kPad + widest_y_tick + kPad + kTick, kPad + first_x_half, 2 * kPad});
  f.title_top = kPad;
  f.y_name_top = kPad + (labels.title.empty() ? 0 : kLine);
  const int top = f.y_name_top + kLine + kPad;
  f.l = PlotLayout{left, top, map_w, map_h, left + map_w + kBarGap, kBarWidth};
  // the rightmost ink: a value of the colour bar, the last x tick's label, the title, the axes' names
  int right = f.l.bar_left + kBarWidth + kPad + std::max(text_width(f.hi_text), text_width(f.lo_text));
  if (!f.x_ticks.empty()) {
    const std::string last = std::to_string(f.x_ticks.back());
    right = std::max(right, left + static_cast<int>(f.x_ticks.back()) - text_width(last) / 2 + text_width(last));
  }
  right = std::max({right, kPad + text_width(labels.title), kPad + text_width(labels.y),
                    kPad + text_width(labels.x)});
  f.width = right + kPad;
  f.height = top + std::max(map_h, 24) + kTick + 2 + kLine + kLine + kPad;
  return f;
}

// Draws one plot of `v` at vertical offset y0 of `img`, coloured on [lo, hi].
void draw_plot(Rgb& img, int y0, const Frame& f0, const torch::Tensor& v, const PlotLabels& labels,
               const std::string& title, float lo, float hi) {
  Frame f = f0;
  f.l.map_top += y0;
  const PlotLayout& l = f.l;
  const int rows = static_cast<int>(v.size(0)), cols = static_cast<int>(v.size(1));
  const float span = hi > lo ? hi - lo : 1.f;
  // the heatmap, row 0 at the bottom
  const auto a = v.accessor<float, 2>();
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < f.repeat; ++k) {
      const int y = l.map_top + l.map_height - 1 - (r * f.repeat + k);
      for (int x = 0; x < cols; ++x) {
        palette_colour((a[r][x] - lo) / span, &img.bytes[(static_cast<size_t>(y) * img.width + l.map_left + x) * 3]);
      }
    }
  }
  // the frame's left and bottom edges, with ticks and their values
  const int bottom = l.map_top + l.map_height;
  fill_rect(img, l.map_left - 1, l.map_top, l.map_left, bottom + 1, kInk);
  fill_rect(img, l.map_left - 1, bottom, l.map_left + l.map_width, bottom + 1, kInk);
  for (int64_t t : f.x_ticks) {
    const int x = l.map_left + static_cast<int>(t);
    fill_rect(img, x, bottom, x + 1, bottom + kTick + 1, kInk);
    const std::string s = std::to_string(t);
    draw_text(img, x - text_width(s) / 2, bottom + kTick + 2, s);
  }
  for (int64_t t : f.y_ticks) {
    const int y = bottom - 1 - static_cast<int>(t) * f.repeat - f.repeat / 2;
    fill_rect(img, l.map_left - 1 - kTick, y, l.map_left - 1, y + 1, kInk);
    const std::string s = std::to_string(t);
    draw_text(img, l.map_left - kTick - kPad - text_width(s), y - 4, s);
  }
  const int x_name_left = std::max(kPad, l.map_left + l.map_width - text_width(labels.x));
  draw_text(img, x_name_left, bottom + kTick + 2 + kLine, labels.x);
  if (!title.empty()) draw_text(img, kPad, y0 + f.title_top, title);
  draw_text(img, kPad, y0 + f.y_name_top, labels.y);
  // the colour bar: high at the top, with the range's ends
  for (int y = 0; y < l.map_height; ++y) {
    const float t = l.map_height > 1 ? 1.f - static_cast<float>(y) / (l.map_height - 1) : 1.f;
    for (int x = 0; x < l.bar_width; ++x) {
      palette_colour(t, &img.bytes[(static_cast<size_t>(l.map_top + y) * img.width + l.bar_left + x) * 3]);
    }
  }
  draw_text(img, l.bar_left + l.bar_width + kPad, l.map_top, f.hi_text);
  draw_text(img, l.bar_left + l.bar_width + kPad, bottom - 8, f.lo_text);
}

torch::Tensor as_plot_values(const torch::Tensor& values) {
  TORCH_CHECK(values.dim() == 2, "plots take 2-D tensors, got ", values.sizes());
  return values.detach().to(torch::kCPU, torch::kFloat32).contiguous();
}

Rgb paper(int width, int height) {
  Rgb img;
  img.width = width;
  img.height = height;
  img.bytes.assign(static_cast<size_t>(width) * height * 3, kPaper);
  return img;
}

}  // namespace

int text_width(const std::string& text) {
  std::string copy = text;
  return stb_easy_font_width(copy.data());
}

// stb_easy_font draws text as axis-aligned quads (4 vertices of 16 bytes each) into a buffer
// and silently drops the quads that do not fit: the buffer grows until all of them did (a
// fixed ~270 bytes a character cut "200" to "20(").
void draw_text(Rgb& img, int x, int y, const std::string& text) {
  constexpr int kQuadBytes = 64;
  std::string copy = text;
  std::vector<char> vertices(static_cast<size_t>(kQuadBytes) * 16 * (text.size() + 1));
  int quads = 0;
  for (;;) {
    quads = stb_easy_font_print(static_cast<float>(x), static_cast<float>(y), copy.data(), nullptr, vertices.data(),
                                static_cast<int>(vertices.size()));
    if (static_cast<size_t>(quads + 1) * kQuadBytes <= vertices.size()) break;
    vertices.resize(vertices.size() * 2);
  }
  for (int q = 0; q < quads; ++q) {
    const float* v0 = reinterpret_cast<const float*>(vertices.data() + q * kQuadBytes);
    const float* v2 = reinterpret_cast<const float*>(vertices.data() + q * kQuadBytes + 32);
    fill_rect(img, static_cast<int>(v0[0]), static_cast<int>(v0[1]), static_cast<int>(v2[0]), static_cast<int>(v2[1]),
              kInk);
  }
}

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
  const torch::Tensor v = as_plot_values(values);
  const float lo = v.numel() ? v.min().item<float>() : 0.f, hi = v.numel() ? v.max().item<float>() : 0.f;
  const Frame f = frame_for(static_cast<int>(v.size(0)), static_cast<int>(v.size(1)), labels, lo, hi);
  Rgb img = paper(f.width, f.height);
  draw_plot(img, 0, f, v, labels, labels.title, lo, hi);
  if (layout) *layout = f.l;
  return img;
}

Png render_plot(const torch::Tensor& values, const PlotLabels& labels) {
  const Rgb img = render_plot_rgb(values, labels);
  return {encode_png(img.bytes.data(), img.width, img.height, 3), img.height, img.width, 3};
}

Rgb render_panels_rgb(const std::vector<PlotPanel>& panels, const PlotLabels& axes, std::vector<PlotLayout>* layouts) {
  TORCH_CHECK(!panels.empty(), "render_panels needs at least one panel");
  std::vector<torch::Tensor> values;
  float lo = 0.f, hi = 0.f;
  bool any = false;
  for (const auto& p : panels) {
    values.push_back(as_plot_values(p.values));
    if (values.back().numel() == 0) continue;
    const float a = values.back().min().item<float>(), b = values.back().max().item<float>();
    lo = any ? std::min(lo, a) : a;
    hi = any ? std::max(hi, b) : b;
    any = true;
  }
  std::vector<Frame> frames;
  int width = 0, height = 0;
  for (size_t i = 0; i < panels.size(); ++i) {
    PlotLabels labels = axes;
    labels.title = panels[i].title;
    frames.push_back(frame_for(static_cast<int>(values[i].size(0)), static_cast<int>(values[i].size(1)), labels, lo, hi));
    width = std::max(width, frames.back().width);
    height += frames.back().height + (i > 0 ? kPanelGap : 0);
  }
  Rgb img = paper(width, height);
  if (layouts) layouts->clear();
  int y0 = 0;
  for (size_t i = 0; i < panels.size(); ++i) {
    draw_plot(img, y0, frames[i], values[i], axes, panels[i].title, lo, hi);
    if (layouts) {
      PlotLayout l = frames[i].l;
      l.map_top += y0;
      layouts->push_back(l);
    }
    y0 += frames[i].height + kPanelGap;
  }
  return img;
}

Png render_panels(const std::vector<PlotPanel>& panels, const PlotLabels& axes) {
  const Rgb img = render_panels_rgb(panels, axes);
  return {encode_png(img.bytes.data(), img.width, img.height, 3), img.height, img.width, 3};
}

}  // namespace monoflow::train
