#include "models/channel_norm_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>

#include "models/optional_tensor.h"
#include "models/simd_math.h"

namespace monoflow::models::cpu {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Frames per tile: a tile's columns are summed over the channels together, row by row of the
// [C, T] item (contiguous runs of kTile floats the compiler vectorises), and 192 channels of a
// tile's inputs (48 KiB a tensor) stay in L2 between the passes.
constexpr int64_t kTile = 64;

// One tile: item `item`, frames [t0, t0 + width) of tensors [B, C, T].
struct Tile {
  int64_t item, t0, width;
};

struct Shape {
  int64_t b, c, t;
  int64_t tiles_per_item() const { return (t + kTile - 1) / kTile; }
  int64_t tiles() const { return b * tiles_per_item(); }
  Tile tile(int64_t i) const {
    const int64_t item = i / tiles_per_item(), t0 = (i % tiles_per_item()) * kTile;
    return {item, t0, std::min(kTile, t - t0)};
  }
  // The offset of [item, channel 0, t0].
  int64_t at(const Tile& tile) const { return tile.item * c * t + tile.t0; }
};

// The norm's input at row offset `i` of a tile: x + residual, or x.
struct Input {
  const float* x;
  const float* residual;  // nullptr for none
  float operator()(int64_t i) const { return residual ? x[i] + residual[i] : x[i]; }
};

// Forward of one tile: each column's mean, then its mean squared deviation (two passes, as the
// original's composite), then y; mean and rstd kept for backward. The body is inlined into a
// baseline and an AVX2 copy (below), the same source compiled for each.
[[gnu::always_inline]] inline void forward_tile(const Shape& s, const Tile& tile, const Input& in, const float* mask,
                                                const float* gamma, const float* beta, float eps, float* y,
                                                float* mean_out, float* rstd_out) {
  const int64_t base = s.at(tile), w = tile.width;
  float mean[kTile] = {}, var[kTile] = {};
  for (int64_t ch = 0; ch < s.c; ++ch) {
    const int64_t row = base + ch * s.t;
    for (int64_t j = 0; j < w; ++j) mean[j] += in(row + j);
  }
  for (int64_t j = 0; j < w; ++j) mean[j] /= static_cast<float>(s.c);
  for (int64_t ch = 0; ch < s.c; ++ch) {
    const int64_t row = base + ch * s.t;
    for (int64_t j = 0; j < w; ++j) {
      const float d = in(row + j) - mean[j];
      var[j] += d * d;
    }
  }
  float rstd[kTile];
  for (int64_t j = 0; j < w; ++j) rstd[j] = 1.0f / std::sqrt(var[j] / static_cast<float>(s.c) + eps);
  const float* m = mask ? mask + tile.item * s.t + tile.t0 : nullptr;
  for (int64_t ch = 0; ch < s.c; ++ch) {
    const int64_t row = base + ch * s.t;
    const float g = gamma[ch], b = beta[ch];
    for (int64_t j = 0; j < w; ++j) {
      const float out = (in(row + j) - mean[j]) * rstd[j] * g + b;
      y[row + j] = m ? out * m[j] : out;
    }
  }
  const int64_t stats = tile.item * s.t + tile.t0;
  std::copy(mean, mean + w, mean_out + stats);
  std::copy(rstd, rstd + w, rstd_out + stats);
}

// Lanes of the per-channel sums over a tile's frames, added pairwise in a fixed order.
constexpr int64_t kLanes = 8;
inline float sum_lanes(const float (&v)[kLanes]) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// Backward of one tile, g' = g * mask and x_hat = (input - mean) rstd:
// d input = rstd (g' gamma - mean_c(g' gamma) - x_hat mean_c(g' gamma x_hat)); gamma's and beta's
// gradients, sum(g' x_hat) and sum(g') over the tile's frames in order, go to the tile's row of
// the partial sums.
[[gnu::always_inline]] inline void backward_tile(const Shape& s, const Tile& tile, const float* grad_y, const Input& in,
                                                 const float* mask, const float* gamma, const float* mean_in,
                                                 const float* rstd_in, float* grad_in, float* gamma_row,
                                                 float* beta_row) {
  const int64_t base = s.at(tile), w = tile.width, stats = tile.item * s.t + tile.t0;
  const float* mean = mean_in + stats;
  const float* rstd = rstd_in + stats;
  const float* m = mask ? mask + tile.item * s.t + tile.t0 : nullptr;
  float sum_g[kTile] = {}, sum_g_x_hat[kTile] = {};
  // A frame's terms of gamma's and beta's sums go to lane j % kLanes (spelt out, so that the
  // compiler keeps the order and still vectorises; a single accumulator kept the loop scalar).
  auto frame = [&](int64_t row, int64_t j, float gm, float& dgamma, float& dbeta) {
    const float g = m ? grad_y[row + j] * m[j] : grad_y[row + j];
    const float x_hat = (in(row + j) - mean[j]) * rstd[j];
    sum_g[j] += g * gm;
    sum_g_x_hat[j] += g * gm * x_hat;
    dgamma += g * x_hat;
    dbeta += g;
  };
  for (int64_t ch = 0; ch < s.c; ++ch) {
    const int64_t row = base + ch * s.t;
    const float gm = gamma[ch];
    float dgamma[kLanes] = {}, dbeta[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) {
      for (int64_t k = 0; k < kLanes; ++k) frame(row, j + k, gm, dgamma[k], dbeta[k]);
    }
    for (; j < w; ++j) frame(row, j, gm, dgamma[j % kLanes], dbeta[j % kLanes]);
    gamma_row[ch] = sum_lanes(dgamma);
    beta_row[ch] = sum_lanes(dbeta);
  }
  const float inv_c = 1.0f / static_cast<float>(s.c);
  for (int64_t j = 0; j < w; ++j) {
    sum_g[j] *= inv_c;
    sum_g_x_hat[j] *= inv_c;
  }
  for (int64_t ch = 0; ch < s.c; ++ch) {
    const int64_t row = base + ch * s.t;
    const float gm = gamma[ch];
    for (int64_t j = 0; j < w; ++j) {
      const float g = m ? grad_y[row + j] * m[j] : grad_y[row + j];
      const float x_hat = (in(row + j) - mean[j]) * rstd[j];
      grad_in[row + j] = rstd[j] * (g * gm - sum_g[j] - x_hat * sum_g_x_hat[j]);
    }
  }
}

void forward_tile_baseline(const Shape& s, const Tile& tile, const Input& in, const float* mask, const float* gamma,
                           const float* beta, float eps, float* y, float* mean, float* rstd) {
  forward_tile(s, tile, in, mask, gamma, beta, eps, y, mean, rstd);
}

void backward_tile_baseline(const Shape& s, const Tile& tile, const float* grad_y, const Input& in, const float* mask,
                            const float* gamma, const float* mean, const float* rstd, float* grad_in,
                            float* gamma_row, float* beta_row) {
  backward_tile(s, tile, grad_y, in, mask, gamma, mean, rstd, grad_in, gamma_row, beta_row);
}

#ifdef MONOFLOW_SIMD_X86
MONOFLOW_AVX2 void forward_tile_avx2(const Shape& s, const Tile& tile, const Input& in, const float* mask,
                                     const float* gamma, const float* beta, float eps, float* y, float* mean,
                                     float* rstd) {
  forward_tile(s, tile, in, mask, gamma, beta, eps, y, mean, rstd);
}

MONOFLOW_AVX2 void backward_tile_avx2(const Shape& s, const Tile& tile, const float* grad_y, const Input& in,
                                      const float* mask, const float* gamma, const float* mean, const float* rstd,
                                      float* grad_in, float* gamma_row, float* beta_row) {
  backward_tile(s, tile, grad_y, in, mask, gamma, mean, rstd, grad_in, gamma_row, beta_row);
}
#endif

// The tile functions for this CPU, chosen once per call.
using ForwardTile = decltype(&forward_tile_baseline);
using BackwardTile = decltype(&backward_tile_baseline);
ForwardTile forward_tile_for_cpu() {
#ifdef MONOFLOW_SIMD_X86
  if (simd::cpu_has_avx2_fma()) return forward_tile_avx2;
#endif
  return forward_tile_baseline;
}
BackwardTile backward_tile_for_cpu() {
#ifdef MONOFLOW_SIMD_X86
  if (simd::cpu_has_avx2_fma()) return backward_tile_avx2;
#endif
  return backward_tile_baseline;
}

Shape shape_of(const torch::Tensor& x) { return {x.size(0), x.size(1), x.size(2)}; }

// A tile's work is ~C * kTile values: a handful of tiles a task.
int64_t tiles_per_task(const Shape& s) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(s.c * kTile, 1)); }

class ChannelLayerNormCpu : public torch::autograd::Function<ChannelLayerNormCpu> {
 public:
  // Empty residual and mask tensors stand for none (optional_tensor.h).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& residual_in,
                               const torch::Tensor& mask_in, const torch::Tensor& gamma_in,
                               const torch::Tensor& beta_in, double eps) {
    RECORD_FUNCTION("monoflow::ChannelLayerNormCpu", std::vector<c10::IValue>({x_in}));
    const torch::Tensor x = x_in.contiguous(), gamma = gamma_in.contiguous(), beta = beta_in.contiguous();
    const torch::Tensor residual = is_given(residual_in) ? residual_in.contiguous() : residual_in;
    const torch::Tensor mask = is_given(mask_in) ? mask_in.contiguous() : mask_in;
    const Shape s = shape_of(x);
    torch::Tensor y = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    torch::Tensor mean = torch::empty({s.b, s.t}, x.options()), rstd = torch::empty({s.b, s.t}, x.options());
    const Input in{x.data_ptr<float>(), data_or_null<float>(residual)};
    const float* pm = data_or_null<float>(mask);
    const float *pg = gamma.data_ptr<float>(), *pb = beta.data_ptr<float>();
    float *py = y.data_ptr<float>(), *pmean = mean.data_ptr<float>(), *prstd = rstd.data_ptr<float>();
    const float e = static_cast<float>(eps);
    const ForwardTile forward_tile = forward_tile_for_cpu();
    at::parallel_for(0, s.tiles(), tiles_per_task(s), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) forward_tile(s, s.tile(i), in, pm, pg, pb, e, py, pmean, prstd);
    });
    ctx->save_for_backward({x, residual, mask, gamma, mean, rstd});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &residual = saved[1], &mask = saved[2], &gamma = saved[3], &mean = saved[4],
                        &rstd = saved[5];
    const Shape s = shape_of(x);
    const torch::Tensor grad_y = grads[0].contiguous();
    torch::Tensor grad_in = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    // One row of gamma's and beta's partial sums per tile, added in tile order below.
    torch::Tensor partial = torch::empty({2, s.tiles(), s.c}, x.options());
    const Input in{x.data_ptr<float>(), data_or_null<float>(residual)};
    const float* pm = data_or_null<float>(mask);
    const float *pgy = grad_y.data_ptr<float>(), *pg = gamma.data_ptr<float>(), *pmean = mean.data_ptr<float>(),
                *prstd = rstd.data_ptr<float>();
    float *pgi = grad_in.data_ptr<float>(), *gamma_rows = partial.data_ptr<float>(),
          *beta_rows = gamma_rows + s.tiles() * s.c;
    const BackwardTile backward_tile = backward_tile_for_cpu();
    at::parallel_for(0, s.tiles(), tiles_per_task(s), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        backward_tile(s, s.tile(i), pgy, in, pm, pg, pmean, prstd, pgi, gamma_rows + i * s.c, beta_rows + i * s.c);
      }
    });
    torch::Tensor grad_gamma = torch::empty({s.c}, x.options()), grad_beta = torch::empty({s.c}, x.options());
    float *pgg = grad_gamma.data_ptr<float>(), *pgb = grad_beta.data_ptr<float>();
    for (int64_t ch = 0; ch < s.c; ++ch) {
      double dgamma = 0.0, dbeta = 0.0;
      for (int64_t i = 0; i < s.tiles(); ++i) {
        dgamma += gamma_rows[i * s.c + ch];
        dbeta += beta_rows[i * s.c + ch];
      }
      pgg[ch] = static_cast<float>(dgamma);
      pgb[ch] = static_cast<float>(dbeta);
    }
    // x and the residual enter as their sum: the same gradient.
    return {grad_in, is_given(residual) ? grad_in : torch::Tensor(), torch::Tensor(), grad_gamma, grad_beta,
            torch::Tensor()};
  }
};

bool float_cpu(const torch::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.layout() == torch::kStrided;
}

}  // namespace

bool channel_norm_cpu_applies(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                              const torch::Tensor& residual, const torch::Tensor& mask) {
  if (!(float_cpu(x) && x.dim() == 3 && float_cpu(gamma) && float_cpu(beta) && gamma.dim() == 1 &&
        beta.dim() == 1 && gamma.size(0) == x.size(1) && beta.size(0) == x.size(1))) {
    return false;
  }
  if (residual.defined() && !(float_cpu(residual) && residual.sizes() == x.sizes())) return false;
  // No gradient goes to the mask (a sequence mask needs none).
  return !mask.defined() || (float_cpu(mask) && !mask.requires_grad() && mask.dim() == 3 &&
                             mask.size(0) == x.size(0) && mask.size(1) == 1 && mask.size(2) == x.size(2));
}

torch::Tensor channel_layer_norm_cpu(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                     double eps, const torch::Tensor& residual, const torch::Tensor& mask) {
  TORCH_CHECK(channel_norm_cpu_applies(x, gamma, beta, residual, mask),
              "channel_layer_norm_cpu: expected float32 CPU tensors x [B, C, T], gamma and beta [C], got x ",
              x.scalar_type(), " ", x.sizes(), " on ", x.device());
  return ChannelLayerNormCpu::apply(x, or_none(residual, x.options()), or_none(mask, x.options()), gamma, beta, eps);
}

}  // namespace monoflow::models::cpu
