#include "train/log/image.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <vector>

#include "common/error.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include "stb_image_write.h"

namespace monoflow::train {
namespace {

// Anchor colours of a perceptually ordered dark-blue -> green -> yellow palette.
constexpr std::array<std::array<float, 3>, 5> kPalette{{{68, 1, 84},
                                                        {59, 82, 139},
                                                        {33, 145, 140},
                                                        {94, 201, 98},
                                                        {253, 231, 37}}};

}  // namespace

void palette_colour(float t, uint8_t* rgb) {
  t = std::clamp(t, 0.0f, 1.0f) * (kPalette.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), kPalette.size() - 2);
  const float f = t - static_cast<float>(i);
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<uint8_t>(kPalette[i][c] * (1 - f) + kPalette[i + 1][c] * f + 0.5f);
  }
}

namespace {

// Paints `v` ([H,W] float, row 0 drawn at the bottom) into rows [row0, row0+H) of the image.
void paint(const torch::Tensor& v, float lo, float hi, int row0, int width,
           std::vector<uint8_t>& rgb) {
  const auto a = v.accessor<float, 2>();
  const float span = hi > lo ? hi - lo : 1.0f;
  const int h = static_cast<int>(v.size(0));
  for (int r = 0; r < h; ++r) {
    const int y = row0 + (h - 1 - r);
    for (int x = 0; x < width; ++x) {
      const float t = x < v.size(1) ? (a[r][x] - lo) / span : 0.0f;
      palette_colour(t, &rgb[(static_cast<size_t>(y) * width + x) * 3]);
    }
  }
}

void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size);
}

torch::Tensor as_cpu_float(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() == 2, "heatmaps take 2-D tensors, got ", t.sizes());
  return t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
}

}  // namespace

std::string encode_png(const uint8_t* rgb, int width, int height, int channels) {
  std::string out;
  const int ok = stbi_write_png_to_func(append_bytes, &out, width, height, channels, rgb,
                                        width * channels);
  TORCH_CHECK(ok != 0, "PNG encoding failed for a ", width, "x", height, " image");
  return out;
}

Png render_heatmap(const torch::Tensor& values, int min_height) {
  torch::Tensor v = as_cpu_float(values);
  if (v.size(0) > 0 && v.size(0) < min_height) {
    const int64_t repeat = (min_height + v.size(0) - 1) / v.size(0);
    v = v.repeat_interleave(repeat, 0).contiguous();
  }
  const int h = static_cast<int>(v.size(0)), w = static_cast<int>(v.size(1));
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  paint(v, v.min().item<float>(), v.max().item<float>(), 0, w, rgb);
  return {encode_png(rgb.data(), w, h, 3), h, w, 3};
}

Png render_stacked(const torch::Tensor& top, const torch::Tensor& bottom) {
  const torch::Tensor a = as_cpu_float(top), b = as_cpu_float(bottom);
  const float lo = std::min(a.min().item<float>(), b.min().item<float>());
  const float hi = std::max(a.max().item<float>(), b.max().item<float>());
  const int w = static_cast<int>(std::max(a.size(1), b.size(1)));
  const int ha = static_cast<int>(a.size(0)), hb = static_cast<int>(b.size(0));
  const int h = ha + 1 + hb;
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3, 255);
  paint(a, lo, hi, 0, w, rgb);
  paint(b, lo, hi, ha + 1, w, rgb);
  return {encode_png(rgb.data(), w, h, 3), h, w, 3};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw FileError(path, 0, "cannot write this file; check the directory exists and is writable");
}

}  // namespace monoflow::train
