// Heatmaps with axes for people to read: the false-colour picture of image.h inside a frame
// with tick labels on both axes, the axes' names, a title and a colour bar with its value range.
// Alignments (token x frame) and mels (channel x frame) in TensorBoard, the run directory,
// `align --images` and `synthesize --mel-png/--align-png`; stacked panels (target over
// generated mel) for the trainer's val_mel_*.png. The margins are computed from the widths of
// the labels they hold, so that no label is cut at the picture's edge.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "train/log/image.h"

namespace monoflow::train {

struct PlotLabels {
  std::string x = "frame";  // horizontal axis: columns
  std::string y = "token";  // vertical axis: rows, row 0 at the bottom
  int min_height = 0;       // rows repeated a whole number of times up to at least this many pixels
  std::string title;        // above the heatmap; "" for none
};

// The picture as RGB bytes, row-major, top row first.
struct Rgb {
  int width = 0, height = 0;
  std::vector<uint8_t> bytes;
  const uint8_t* at(int x, int y) const { return &bytes[(static_cast<size_t>(y) * width + x) * 3]; }
};

// Where render_plot_rgb put the heatmap and the colour bar (for tests and callers that mark
// the picture): [left, left + width) x [top, top + height) in pixels.
struct PlotLayout {
  int map_left = 0, map_top = 0, map_width = 0, map_height = 0;
  int bar_left = 0, bar_width = 0;  // the colour bar spans the heatmap's rows
};

Rgb render_plot_rgb(const torch::Tensor& values /*[H, W]*/, const PlotLabels& labels, PlotLayout* layout = nullptr);
Png render_plot(const torch::Tensor& values, const PlotLabels& labels);

// One panel of a stacked plot: its values and its title.
struct PlotPanel {
  torch::Tensor values;  // [H, W]
  std::string title;
};
// Panels one above the other, each a full plot (axes, ticks, colour bar) with its own title,
// coloured on one scale (the minimum and maximum over all panels) so that they compare; axis
// names from `axes` (its title is not used). Panels narrower than the widest are padded with
// paper on the right. `layouts` (optional) receives each panel's layout in the whole picture.
Rgb render_panels_rgb(const std::vector<PlotPanel>& panels, const PlotLabels& axes,
                      std::vector<PlotLayout>* layouts = nullptr);
Png render_panels(const std::vector<PlotPanel>& panels, const PlotLabels& axes);

// Tick values for an axis of `count` cells: 0 and multiples of a 1-2-5 step, at most ~max_ticks.
std::vector<int64_t> axis_ticks(int64_t count, int max_ticks);

// The text font (stb_easy_font, ASCII): the advance width of `text` in pixels, and `text`
// drawn in black with its top-left corner at (x, y), cut at the picture's edges.
int text_width(const std::string& text);
void draw_text(Rgb& img, int x, int y, const std::string& text);

}  // namespace monoflow::train
