// Pictures for TensorBoard and the run directory: a 2-D tensor drawn as a false-colour
// PNG (viridis-like palette, row 0 at the bottom as in the usual spectrogram/alignment plots).
#pragma once

#include <torch/torch.h>

#include <string>

namespace monoflow::train {

struct Png {
  std::string bytes;  // encoded PNG
  int height = 0;
  int width = 0;
  int channels = 3;
};

// Min-max normalised over the tensor (a constant tensor maps to the palette's low end).
// Rows are repeated a whole number of times until the picture is at least min_height tall
// (alignments have few rows: one per token).
Png render_heatmap(const torch::Tensor& values /*[H, W]*/, int min_height = 0);
// Two heatmaps one above the other (e.g. target mel over generated mel), normalised jointly,
// separated by a white line; widths may differ (the narrower is padded with the low end).
Png render_stacked(const torch::Tensor& top, const torch::Tensor& bottom);
// The palette's colour of t in [0, 1] (clamped) into rgb[0..2].
void palette_colour(float t, uint8_t* rgb);
// RGB bytes (row-major, top row first) to PNG.
std::string encode_png(const uint8_t* rgb, int width, int height, int channels);
void write_file(const std::string& path, const std::string& bytes);  // FileError on failure

}  // namespace monoflow::train
