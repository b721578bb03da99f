#include "models/winograd_conv1d.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "models/simd_math.h"

#ifdef MONOFLOW_SIMD_X86
#define MONOFLOW_WINOGRAD_X86 1
#endif

namespace monoflow::models {

namespace {

constexpr int kOut = 4;                  // outputs per tile (m)
constexpr int kTaps = 5;                 // kernel size (r)
constexpr int kPoints = kOut + kTaps - 1;  // n = 8
constexpr int kLanes = 8;                // tiles per vector step
// The product at each point is a hand-written GEMM (MKL's sgemm reached 115-135 GFLOP/s on
// these shapes on 2 Zen 3 cores, oneDNN's direct convolution 155): a 6 x 16 register block of
// C (12 AVX2 accumulators; with AVX-512F a 6 x 32 block, 12 registers of 16) over the whole
// K = C_in, from operands stored in the order the block reads them. The weight is packed once,
// [8][C_out / 6][C_in][6]; the input transform writes its output packed, [8][cols / 16][C_in][16];
// C comes out row-major, [8][C_out][cols].
constexpr int kRows = 6;
constexpr int kCols = 16;  // the tile count per batch item is padded to it
// winograd_wn_layer: the gated unit and its res_skip product one block of 8 tiles (32 frames,
// 2 column blocks of the GEMM) at a time; the block's gated values, [2][C][16], stay in L1.
constexpr int kBlockTiles = kLanes;
constexpr int kBlockFrames = kOut * kBlockTiles;
constexpr int kBlockCols = kBlockFrames / kCols;
static_assert(kBlockTiles % kLanes == 0 && kLanes * kOut == 2 * kCols, "a lane step is two GEMM column blocks");

// The transforms of F(4, 5) for correlation (what conv1d computes): y = AT [(G w) * (BT d)].
// From the linear-convolution Toom-Cook algorithm at the points 0, 1, -1, 2, -2, 1/2, -1/2, ∞:
// with V the 8 x 8 evaluation (Vandermonde) matrix, C = V^-1 interpolates; BT = C^T, G
// evaluates the kernel and AT^T the outputs' polynomial. Each row p of BT is scaled so that its
// smallest entry is 1 (all its entries are then exact in float: 1, 4.25, 5.25, ...) and G's row
// by the inverse, which leaves the product unchanged and puts the inexact factors in the
// weight, transformed once in float64.
struct Transforms {
  std::array<std::array<float, kPoints>, kPoints> bt;  // [p][j]
  std::array<std::array<double, kTaps>, kPoints> g;    // [p][k]
  std::array<std::array<float, kPoints>, kOut> at;     // [i][p]
};

const Transforms& transforms() {
  static const Transforms t = [] {
    const double points[kPoints - 1] = {0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5};
    auto v = torch::zeros({kPoints, kPoints}, torch::kDouble);
    for (int p = 0; p < kPoints - 1; ++p) {
      for (int j = 0; j < kPoints; ++j) v[p][j] = std::pow(points[p], j);
    }
    v[kPoints - 1][kPoints - 1] = 1.0;
    const auto c = torch::linalg_inv(v).contiguous();
    const auto* cp = c.data_ptr<double>();
    Transforms out{};
    for (int p = 0; p < kPoints; ++p) {
      double smallest = 0.0;
      for (int j = 0; j < kPoints; ++j) {
        const double e = std::abs(cp[j * kPoints + p]);
        if (e > 1e-9 && (smallest == 0.0 || e < smallest)) smallest = e;
      }
      const double scale = 1.0 / smallest;
      for (int j = 0; j < kPoints; ++j) {
        const double e = cp[j * kPoints + p] * scale;
        out.bt[p][j] = static_cast<float>(std::abs(e) < 1e-9 ? 0.0 : std::round(e * 64.0) / 64.0);
      }
      for (int k = 0; k < kTaps; ++k) {
        const double e = p < kPoints - 1 ? std::pow(points[p], k) : (k == kTaps - 1 ? 1.0 : 0.0);
        out.g[p][k] = e / scale;
      }
      for (int i = 0; i < kOut; ++i) {
        out.at[i][p] = static_cast<float>(p < kPoints - 1 ? std::pow(points[p], i) : (i == kOut - 1 ? 1.0 : 0.0));
      }
    }
    return out;
  }();
  return t;
}

// The environment's switches: on unless the variable is "0".
bool not_turned_off(const char* variable) {
  const char* env = std::getenv(variable);
  return !(env && std::string(env) == "0");
}

std::atomic<int>& enabled_flag() {
  static std::atomic<int> flag = not_turned_off("MONOFLOW_CPU_WINOGRAD") ? 1 : 0;
  return flag;
}

std::atomic<bool> simd_allowed{true};
std::atomic<bool> avx512_allowed{not_turned_off("MONOFLOW_CPU_AVX512")};

bool has_avx2() {
#ifdef MONOFLOW_WINOGRAD_X86
  return simd::cpu_has_avx2_fma() && simd_allowed.load();
#else
  return false;
#endif
}

// The GEMM blocks in 16-lane registers (below), where AVX2 is allowed too.
bool has_avx512() {
#ifdef MONOFLOW_WINOGRAD_X86
  return has_avx2() && simd::cpu_has_avx512f() && avx512_allowed.load();
#else
  return false;
#endif
}

// Shapes of one call. Tiles of every batch item sit side by side in the products' columns.
struct Shape {
  int64_t batch, c_in, c_out, t, tiles, tiles_padded, cols;
};

Shape shape_of(const torch::Tensor& x, const torch::Tensor& u) {
  Shape s{};
  s.batch = x.size(0);
  s.c_in = x.size(1);
  s.t = x.size(2);
  s.c_out = u.size(1) * kRows;
  s.tiles = (s.t + kOut - 1) / kOut;
  s.tiles_padded = (s.tiles + kCols - 1) / kCols * kCols;
  s.cols = s.batch * s.tiles_padded;
  return s;
}

// The input's phases: ph[r][q] = x[4 q + r - 2] (0 outside [0, t)), q < tiles_padded + 1, so that
// input j of tile q is ph[j % 4][q + j / 4], contiguous over tiles.
void phases(const float* x, int64_t t, int64_t tiles_padded, float* ph) {
  const int64_t stride = tiles_padded + 1;
  for (int r = 0; r < kOut; ++r) {
    float* row = ph + r * stride;
    for (int64_t q = 0; q < stride; ++q) {
      const int64_t i = kOut * q + r - (kTaps / 2);
      row[q] = (i >= 0 && i < t) ? x[i] : 0.0f;
    }
  }
}

// ------------------------------------------------------------------------------ generic (scalar)

// Where column `col` of channel c lands in the packed input of one point.
inline int64_t packed_index(int64_t c, int64_t c_in, int64_t col) {
  return (col / kCols) * (c_in * kCols) + c * kCols + col % kCols;
}

void input_transform_generic(const Transforms& tr, const float* ph, int64_t tiles_padded, float* v,
                             int64_t point_stride, int64_t c, int64_t c_in, int64_t col0) {
  const int64_t stride = tiles_padded + 1;
  for (int p = 0; p < kPoints; ++p) {
    float* out = v + p * point_stride;
    for (int64_t q = 0; q < tiles_padded; ++q) {
      float acc = 0.0f;
      for (int j = 0; j < kPoints; ++j) acc += tr.bt[p][j] * ph[(j % kOut) * stride + q + j / kOut];
      out[packed_index(c, c_in, col0 + q)] = acc;
    }
  }
}

// acc = the packed A panel (k x 6) times the packed B panel (k x 16): block_6x16's portable twin.
void block_6x16_generic(const float* ap, const float* bp, int64_t k, float (&acc)[kRows][kCols]) {
  for (auto& row : acc) std::fill(std::begin(row), std::end(row), 0.0f);
  for (int64_t i = 0; i < k; ++i) {
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < kCols; ++j) acc[r][j] += ap[i * kRows + r] * bp[i * kCols + j];
    }
  }
}

// C [rows, cols] (row stride ldc) = A x B for packed A [rows / 6][k][6] and B [cols / 16][k][16],
// row blocks [rb0, rb1).
void gemm_generic(const float* a, const float* b, int64_t k, int64_t rb0, int64_t rb1, int64_t col_blocks,
                  float* c, int64_t ldc) {
  for (int64_t rb = rb0; rb < rb1; ++rb) {
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      float acc[kRows][kCols];
      block_6x16_generic(a + rb * k * kRows, b + cb * k * kCols, k, acc);
      for (int r = 0; r < kRows; ++r) {
        for (int j = 0; j < kCols; ++j) c[(rb * kRows + r) * ldc + cb * kCols + j] = acc[r][j];
      }
    }
  }
}

// outputs of channel row `o` for every tile: y[4 q + i] for 4 q + i < t
void output_transform_generic(const Transforms& tr, const float* m, int64_t point_stride, int64_t t, float bias,
                              float* y) {
  const int64_t tiles = (t + kOut - 1) / kOut;
  for (int64_t q = 0; q < tiles; ++q) {
    for (int i = 0; i < kOut && kOut * q + i < t; ++i) {
      float acc = 0.0f;
      for (int p = 0; p < kPoints; ++p) acc += tr.at[i][p] * m[p * point_stride + q];
      y[kOut * q + i] = acc + bias;
    }
  }
}

// Where row `row` of the res_skip product r goes in one batch item: the residual's h rows first,
// then the skip's (only the skip where there is no residual); nowhere for the rows that pad the
// weight to a multiple of 6 (nullptr).
struct RowTargets {
  float* residual;  // nullptr: every row is the skip's
  float* skip;
  int64_t h, t, rows;
  float* row(int64_t r) const {
    if (r >= rows) return nullptr;
    if (!residual) return skip + r * t;
    return r < h ? residual + r * t : skip + (r - h) * t;
  }
};

// The gated unit of one block: tiles col0 .. col0 + 7 of the products' rows o (a) and o + h (b),
// into packed[f / 16][o][f % 16] for the block's frames f = 4 l + i.
void gated_block_generic(const Transforms& tr, const float* m, int64_t cols, int64_t point_stride, int64_t col0,
                         int64_t h, const float* bias, float* packed) {
  for (int64_t o = 0; o < h; ++o) {
    const float* m_a = m + o * cols + col0;
    const float* m_b = m + (o + h) * cols + col0;
    const float bias_a = bias ? bias[o] : 0.0f, bias_b = bias ? bias[o + h] : 0.0f;
    for (int l = 0; l < kBlockTiles; ++l) {
      for (int i = 0; i < kOut; ++i) {
        float a = 0.0f, b = 0.0f;
        for (int p = 0; p < kPoints; ++p) {
          a += tr.at[i][p] * m_a[p * point_stride + l];
          b += tr.at[i][p] * m_b[p * point_stride + l];
        }
        a += bias_a;
        b += bias_b;
        const int f = kOut * l + i;
        packed[(f / kCols) * h * kCols + o * kCols + f % kCols] = simd::gate(a, b);
      }
    }
  }
}

// target rows += W packed + bias for the block's first `valid` frames (from frame f0): W packed
// [rows / 6][k][6], the block's gated values [2][k][16].
void rows_block_generic(const float* w, const float* packed, int64_t k, int64_t rows, const float* bias,
                        const RowTargets& rt, int64_t f0, int64_t valid) {
  for (int64_t rb = 0; rb < rows / kRows; ++rb) {
    for (int cb = 0; cb < kBlockCols && cb * kCols < valid; ++cb) {
      float acc[kRows][kCols];
      block_6x16_generic(w + rb * k * kRows, packed + cb * k * kCols, k, acc);
      const int64_t n = std::min<int64_t>(kCols, valid - cb * kCols);
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = rb * kRows + r;
        float* dst = rt.row(row);
        if (!dst) continue;
        dst += f0 + cb * kCols;
        for (int64_t j = 0; j < n; ++j) dst[j] += acc[r][j] + bias[row];
      }
    }
  }
}

// ------------------------------------------------------------------------------ AVX2 + FMA
#ifdef MONOFLOW_WINOGRAD_X86
using simd::gate_avx2;

MONOFLOW_AVX2 void input_transform_avx2(const Transforms& tr, const float* ph, int64_t tiles_padded, float* v,
                                        int64_t point_stride, int64_t c, int64_t c_in, int64_t col0) {
  const int64_t stride = tiles_padded + 1;
  __m256 bt[kPoints][kPoints];
  for (int p = 0; p < kPoints; ++p) {
    for (int j = 0; j < kPoints; ++j) bt[p][j] = _mm256_set1_ps(tr.bt[p][j]);
  }
  for (int64_t q = 0; q < tiles_padded; q += kLanes) {
    __m256 d[kPoints];
    for (int j = 0; j < kPoints; ++j) d[j] = _mm256_loadu_ps(ph + (j % kOut) * stride + q + j / kOut);
    for (int p = 0; p < kPoints; ++p) {
      __m256 acc = _mm256_mul_ps(bt[p][0], d[0]);
      for (int j = 1; j < kPoints; ++j) acc = _mm256_fmadd_ps(bt[p][j], d[j], acc);
      _mm256_storeu_ps(v + p * point_stride + packed_index(c, c_in, col0 + q), acc);
    }
  }
}

// The 6x16 register block: acc = the packed A panel (k x 6) times the packed B panel (k x 16),
// 12 accumulators of 6 rows x 2 vectors of 8 columns. Inlined, the constant-bound loops unroll
// and the array stays in registers.
MONOFLOW_AVX2 __attribute__((always_inline)) inline void block_6x16(const float* ap, const float* bp, int64_t k,
                                                                     __m256 (&acc)[kRows][2]) {
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i, ap += kRows, bp += kCols) {
    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
    for (int r = 0; r < kRows; ++r) {
      const __m256 av = _mm256_broadcast_ss(ap + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
}

MONOFLOW_AVX2 void gemm_avx2(const float* a, const float* b, int64_t k, int64_t rb0, int64_t rb1,
                             int64_t col_blocks, float* c, int64_t ldc) {
  for (int64_t rb = rb0; rb < rb1; ++rb) {
    const float* ap0 = a + rb * k * kRows;
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      __m256 acc[kRows][2];
      block_6x16(ap0, b + cb * k * kCols, k, acc);
      float* cp = c + rb * kRows * ldc + cb * kCols;
      for (int r = 0; r < kRows; ++r) {
        _mm256_storeu_ps(cp + r * ldc, acc[r][0]);
        _mm256_storeu_ps(cp + r * ldc + 8, acc[r][1]);
      }
    }
  }
}

// The 4 output phases of channel row m (points `point_stride` apart) for tiles q..q+7.
MONOFLOW_AVX2 inline void outputs_avx2(const __m256 (&at)[kOut][kPoints], const float* m, int64_t point_stride,
                                       int64_t q, __m256 bias, __m256 (&y)[kOut]) {
  __m256 mp[kPoints];
  for (int p = 0; p < kPoints; ++p) mp[p] = _mm256_loadu_ps(m + p * point_stride + q);
  for (int i = 0; i < kOut; ++i) {
    __m256 acc = bias;
    for (int p = 0; p < kPoints; ++p) acc = _mm256_fmadd_ps(at[i][p], mp[p], acc);
    y[i] = acc;
  }
}

// Lanes are tiles, so output 4 (q + l) + i is y[i][l]: a 4 x 8 transpose on the way out.
inline void store_tiles(const float (&buf)[kOut][kLanes], int64_t q, int64_t t, float* out) {
  const int64_t base = kOut * q;
  if (base + kOut * kLanes <= t) {
    for (int l = 0; l < kLanes; ++l) {
      for (int i = 0; i < kOut; ++i) out[base + kOut * l + i] = buf[i][l];
    }
    return;
  }
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < kOut; ++i) {
      if (base + kOut * l + i < t) out[base + kOut * l + i] = buf[i][l];
    }
  }
}

MONOFLOW_AVX2 void load_at(const Transforms& tr, __m256 (&at)[kOut][kPoints]) {
  for (int i = 0; i < kOut; ++i) {
    for (int p = 0; p < kPoints; ++p) at[i][p] = _mm256_set1_ps(tr.at[i][p]);
  }
}

MONOFLOW_AVX2 void output_transform_avx2(const Transforms& tr, const float* m, int64_t point_stride, int64_t t,
                                         float bias, float* y) {
  __m256 at[kOut][kPoints];
  load_at(tr, at);
  const int64_t tiles = (t + kOut - 1) / kOut;
  alignas(32) float buf[kOut][kLanes];
  for (int64_t q = 0; q < tiles; q += kLanes) {
    __m256 out[kOut];
    outputs_avx2(at, m, point_stride, q, _mm256_set1_ps(bias), out);
    for (int i = 0; i < kOut; ++i) _mm256_store_ps(buf[i], out[i]);
    store_tiles(buf, q, t, y);
  }
}

MONOFLOW_AVX2 void gated_transform_avx2(const Transforms& tr, const float* m_a, const float* m_b,
                                        int64_t point_stride, int64_t t, float bias_a, float bias_b, float* y) {
  __m256 at[kOut][kPoints];
  load_at(tr, at);
  const int64_t tiles = (t + kOut - 1) / kOut;
  alignas(32) float buf[kOut][kLanes];
  for (int64_t q = 0; q < tiles; q += kLanes) {
    __m256 a[kOut], b[kOut];
    outputs_avx2(at, m_a, point_stride, q, _mm256_set1_ps(bias_a), a);
    outputs_avx2(at, m_b, point_stride, q, _mm256_set1_ps(bias_b), b);
    for (int i = 0; i < kOut; ++i) _mm256_store_ps(buf[i], gate_avx2(a[i], b[i]));
    store_tiles(buf, q, t, y);
  }
}
MONOFLOW_AVX2 void gated_block_avx2(const Transforms& tr, const float* m, int64_t cols, int64_t point_stride,
                                    int64_t col0, int64_t h, const float* bias, float* packed) {
  __m256 at[kOut][kPoints];
  load_at(tr, at);
  for (int64_t o = 0; o < h; ++o) {
    const __m256 bias_a = _mm256_set1_ps(bias ? bias[o] : 0.0f), bias_b = _mm256_set1_ps(bias ? bias[o + h] : 0.0f);
    for (int step = 0; step < kBlockTiles / kLanes; ++step) {
      __m256 a[kOut], b[kOut], g[kOut];
      outputs_avx2(at, m + o * cols + col0, point_stride, step * kLanes, bias_a, a);
      outputs_avx2(at, m + (o + h) * cols + col0, point_stride, step * kLanes, bias_b, b);
      for (int i = 0; i < kOut; ++i) g[i] = gate_avx2(a[i], b[i]);
      // g[i] lane l is frame 4 l + i of the step: a 4 x 8 transpose in registers, into its
      // frames 0-7, 8-15, 16-23 and 24-31 (t_l holds lane l low and lane l + 4 high).
      const __m256 lo01 = _mm256_unpacklo_ps(g[0], g[1]), lo23 = _mm256_unpacklo_ps(g[2], g[3]);
      const __m256 hi01 = _mm256_unpackhi_ps(g[0], g[1]), hi23 = _mm256_unpackhi_ps(g[2], g[3]);
      const __m256 t0 = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 t1 = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 t2 = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 t3 = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(3, 2, 3, 2));
      float* c0 = packed + (2 * step) * h * kCols + o * kCols;
      float* c1 = packed + (2 * step + 1) * h * kCols + o * kCols;
      _mm256_storeu_ps(c0, _mm256_permute2f128_ps(t0, t1, 0x20));
      _mm256_storeu_ps(c0 + 8, _mm256_permute2f128_ps(t2, t3, 0x20));
      _mm256_storeu_ps(c1, _mm256_permute2f128_ps(t0, t1, 0x31));
      _mm256_storeu_ps(c1 + 8, _mm256_permute2f128_ps(t2, t3, 0x31));
    }
  }
}

MONOFLOW_AVX2 void rows_block_avx2(const float* w, const float* packed, int64_t k, int64_t rows, const float* bias,
                                   const RowTargets& rt, int64_t f0, int64_t valid) {
  for (int64_t rb = 0; rb < rows / kRows; ++rb) {
    for (int cb = 0; cb < kBlockCols && cb * kCols < valid; ++cb) {
      __m256 acc[kRows][2];
      block_6x16(w + rb * k * kRows, packed + cb * k * kCols, k, acc);
      // Out through memory: indexing the accumulators in the loop below would keep them on the
      // stack in the loop above (measured 3x slower).
      alignas(32) float out[kRows][kCols];
      for (int r = 0; r < kRows; ++r) {
        _mm256_store_ps(out[r], acc[r][0]);
        _mm256_store_ps(out[r] + 8, acc[r][1]);
      }
      const int64_t n = std::min<int64_t>(kCols, valid - cb * kCols);
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = rb * kRows + r;
        float* dst = rt.row(row);
        if (!dst) continue;
        dst += f0 + cb * kCols;
        const __m256 bv = _mm256_set1_ps(bias[row]);
        const __m256 v0 = _mm256_add_ps(_mm256_load_ps(out[r]), bv), v1 = _mm256_add_ps(_mm256_load_ps(out[r] + 8), bv);
        if (n == kCols) {
          _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), v0));
          _mm256_storeu_ps(dst + 8, _mm256_add_ps(_mm256_loadu_ps(dst + 8), v1));
        } else {
          _mm256_store_ps(out[r], v0);
          _mm256_store_ps(out[r] + 8, v1);
          for (int64_t j = 0; j < n; ++j) dst[j] += out[r][j];
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------ AVX-512F
// The same GEMM blocks in 16-lane registers: a row of a packed B panel is one register, so a
// 6 x 32 block (two panels) keeps the 12 accumulators of block_6x16 and covers twice the
// columns per broadcast. Every accumulator sums over k in block_6x16's order from zero, and
// rows_block's additions are the same, so the results are the AVX2 path's bits. Cores with two
// 512-bit FMA units (Intel's server cores) run the products at twice AVX2's rate; on cores that
// split 512-bit operations in two (AMD's Zen 4) the rate stays AVX2's.

// acc[r][p] = the packed A panel (k x 6) times the B panel p (k x 16, panels `panel` apart).
template <int kPanels>
MONOFLOW_AVX512 __attribute__((always_inline)) inline void block_6xn_avx512(const float* ap, const float* bp,
                                                                             int64_t panel, int64_t k,
                                                                             __m512 (&acc)[kRows][kPanels]) {
  for (int r = 0; r < kRows; ++r) {
    for (int p = 0; p < kPanels; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < k; ++i, ap += kRows, bp += kCols) {
    __m512 b[kPanels];
    for (int p = 0; p < kPanels; ++p) b[p] = _mm512_loadu_ps(bp + p * panel);
    for (int r = 0; r < kRows; ++r) {
      const __m512 av = _mm512_set1_ps(ap[r]);
      for (int p = 0; p < kPanels; ++p) acc[r][p] = _mm512_fmadd_ps(av, b[p], acc[r][p]);
    }
  }
}

template <int kPanels>
MONOFLOW_AVX512 __attribute__((always_inline)) inline void store_block_avx512(const __m512 (&acc)[kRows][kPanels],
                                                                               float* c, int64_t ldc) {
  for (int r = 0; r < kRows; ++r) {
    for (int p = 0; p < kPanels; ++p) _mm512_storeu_ps(c + r * ldc + p * kCols, acc[r][p]);
  }
}

MONOFLOW_AVX512 void gemm_avx512(const float* a, const float* b, int64_t k, int64_t rb0, int64_t rb1,
                                 int64_t col_blocks, float* c, int64_t ldc) {
  const int64_t panel = k * kCols;
  for (int64_t rb = rb0; rb < rb1; ++rb) {
    const float* ap0 = a + rb * k * kRows;
    float* cp = c + rb * kRows * ldc;
    int64_t cb = 0;
    for (; cb + 2 <= col_blocks; cb += 2) {
      __m512 acc[kRows][2];
      block_6xn_avx512<2>(ap0, b + cb * panel, panel, k, acc);
      store_block_avx512<2>(acc, cp + cb * kCols, ldc);
    }
    if (cb < col_blocks) {
      __m512 acc[kRows][1];
      block_6xn_avx512<1>(ap0, b + cb * panel, panel, k, acc);
      store_block_avx512<1>(acc, cp + cb * kCols, ldc);
    }
  }
}

// rows_block_avx2's epilogue for one row block: target rows += acc + bias over the block's
// first `valid` frames, the tail through masked loads and stores.
template <int kPanels>
MONOFLOW_AVX512 __attribute__((always_inline)) inline void add_rows_avx512(const __m512 (&acc)[kRows][kPanels],
                                                                            int64_t rb, const float* bias,
                                                                            const RowTargets& rt, int64_t f0,
                                                                            int64_t valid) {
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = rb * kRows + r;
    float* dst = rt.row(row);
    if (!dst) continue;
    const __m512 bv = _mm512_set1_ps(bias[row]);
    for (int p = 0; p < kPanels; ++p) {
      const int64_t n = std::min<int64_t>(kCols, valid - p * kCols);
      const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
      float* d = dst + f0 + p * kCols;
      const __m512 v = _mm512_add_ps(acc[r][p], bv);
      _mm512_mask_storeu_ps(d, mask, _mm512_add_ps(_mm512_maskz_loadu_ps(mask, d), v));
    }
  }
}

MONOFLOW_AVX512 void rows_block_avx512(const float* w, const float* packed, int64_t k, int64_t rows,
                                       const float* bias, const RowTargets& rt, int64_t f0, int64_t valid) {
  static_assert(kBlockCols == 2, "a block of frames is two panels");
  const int64_t panel = k * kCols;
  for (int64_t rb = 0; rb < rows / kRows; ++rb) {
    if (valid > kCols) {
      __m512 acc[kRows][2];
      block_6xn_avx512<2>(w + rb * k * kRows, packed, panel, k, acc);
      add_rows_avx512<2>(acc, rb, bias, rt, f0, valid);
    } else {
      __m512 acc[kRows][1];
      block_6xn_avx512<1>(w + rb * k * kRows, packed, panel, k, acc);
      add_rows_avx512<1>(acc, rb, bias, rt, f0, valid);
    }
  }
}
#endif  // MONOFLOW_WINOGRAD_X86

// ------------------------------------------------------------------------------ the pipeline

// The product at the 8 points, [8, c_out, cols], from x [B, c_in, t].
torch::Tensor products(const torch::Tensor& x_in, const torch::Tensor& u, const Shape& s) {
  const auto x = x_in.contiguous();
  const Transforms& tr = transforms();
  // 64-byte aligned (LibTorch's CPU allocator): the GEMM loads packed rows of 16 aligned.
  auto v = torch::empty({kPoints, s.c_in, s.cols}, x.options());
  const float* xp = x.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  const int64_t point_stride = s.c_in * s.cols;
  const bool avx2 = has_avx2();
  const bool avx512 = has_avx512();
  at::parallel_for(0, s.batch * s.c_in, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> ph(kOut * (s.tiles_padded + 1));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / s.c_in, c = row % s.c_in;
      phases(xp + row * s.t, s.t, s.tiles_padded, ph.data());
#ifdef MONOFLOW_WINOGRAD_X86
      if (avx2) {
        input_transform_avx2(tr, ph.data(), s.tiles_padded, vp, point_stride, c, s.c_in, b * s.tiles_padded);
        continue;
      }
#endif
      (void)avx2;
      input_transform_generic(tr, ph.data(), s.tiles_padded, vp, point_stride, c, s.c_in, b * s.tiles_padded);
    }
  });
  auto m = torch::empty({kPoints, s.c_out, s.cols}, x.options());
  const float* up = u.data_ptr<float>();
  float* mp = m.data_ptr<float>();
  const int64_t row_blocks = s.c_out / kRows, col_blocks = s.cols / kCols;
  // Work items: (point, row block); a thread's run of them stays within few points, whose
  // packed input (C_in x cols) it keeps in its L2.
  at::parallel_for(0, kPoints * row_blocks, 4, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end;) {
      const int64_t p = item / row_blocks, rb0 = item % row_blocks;
      const int64_t rb1 = std::min(row_blocks, rb0 + (end - item));
      const float* a = up + p * s.c_out * s.c_in;
      const float* b = vp + p * point_stride;
      float* c = mp + p * s.c_out * s.cols;
#ifdef MONOFLOW_WINOGRAD_X86
      if (avx512) {
        gemm_avx512(a, b, s.c_in, rb0, rb1, col_blocks, c, s.cols);
      } else if (avx2) {
        gemm_avx2(a, b, s.c_in, rb0, rb1, col_blocks, c, s.cols);
      } else {
        gemm_generic(a, b, s.c_in, rb0, rb1, col_blocks, c, s.cols);
      }
#else
      gemm_generic(a, b, s.c_in, rb0, rb1, col_blocks, c, s.cols);
#endif
      item += rb1 - rb0;
    }
  });
  return m;
}

// What every output transform reads: the products at the points (`products`), where point p
// starts (p x point_stride), and the convolution's bias (null: none).
struct PointProducts {
  PointProducts(const torch::Tensor& x, const torch::Tensor& u, const Shape& s, const torch::Tensor& bias_in)
      : m(products(x, u, s)), bias(bias_in.defined() ? bias_in.contiguous() : torch::Tensor()),
        data(m.data_ptr<float>()), bias_data(bias.defined() ? bias.data_ptr<float>() : nullptr),
        point_stride(s.c_out * s.cols) {}
  torch::Tensor m, bias;
  const float* data;
  const float* bias_data;
  int64_t point_stride;
};

}  // namespace

bool cpu_winograd_enabled() { return enabled_flag().load() != 0; }
void set_cpu_winograd(bool enabled) { enabled_flag().store(enabled ? 1 : 0); }
void set_cpu_winograd_simd(bool enabled) { simd_allowed.store(enabled); }
void set_cpu_winograd_avx512(bool enabled) { avx512_allowed.store(enabled); }
bool cpu_winograd_avx512_active() { return has_avx512(); }

bool winograd_applies(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding, int64_t dilation) {
  return cpu_winograd_enabled() && !torch::GradMode::is_enabled() && x.device().is_cpu() && weight.device().is_cpu() &&
         x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat && x.dim() == 3 &&
         weight.dim() == 3 && weight.size(2) == kTaps && x.size(1) == weight.size(1) &&
         weight.size(0) % kRows == 0 && dilation == 1 &&
         padding == kTaps / 2 && x.size(2) > 0;
}

torch::Tensor winograd_weight(const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 3 && weight.size(2) == kTaps, "winograd_weight: expected [C_out, C_in, 5], got ",
              weight.sizes());
  const Transforms& tr = transforms();
  auto g = torch::empty({kPoints, kTaps}, torch::kDouble);
  for (int p = 0; p < kPoints; ++p) {
    for (int k = 0; k < kTaps; ++k) g[p][k] = tr.g[p][k];
  }
  TORCH_CHECK(weight.size(0) % kRows == 0, "winograd_weight: output channels ", weight.size(0),
              " not a multiple of ", kRows);
  // [C_out, C_in, 5] x [5, 8] -> [C_out, C_in, 8] -> [8, C_out / 6, 6, C_in] -> [8, C_out / 6, C_in, 6]
  const int64_t c_out = weight.size(0), c_in = weight.size(1);
  const auto u = torch::matmul(weight.detach().to(torch::kCPU, torch::kDouble), g.t());
  return u.permute({2, 0, 1}).reshape({kPoints, c_out / kRows, kRows, c_in}).transpose(2, 3).to(torch::kFloat).contiguous();
}

torch::Tensor winograd_conv1d(const torch::Tensor& x, const torch::Tensor& u, const torch::Tensor& bias) {
  const Shape s = shape_of(x, u);
  const PointProducts pp(x, u, s, bias);
  auto y = torch::empty({s.batch, s.c_out, s.t}, x.options());
  const Transforms& tr = transforms();
  const float *mp = pp.data, *bp = pp.bias_data;
  const int64_t point_stride = pp.point_stride;
  float* yp = y.data_ptr<float>();
  const bool avx2 = has_avx2();
  at::parallel_for(0, s.batch * s.c_out, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / s.c_out, o = row % s.c_out;
      const float* in = mp + o * s.cols + b * s.tiles_padded;
      const float bias_o = bp ? bp[o] : 0.0f;
#ifdef MONOFLOW_WINOGRAD_X86
      if (avx2) {
        output_transform_avx2(tr, in, point_stride, s.t, bias_o, yp + row * s.t);
        continue;
      }
#endif
      (void)avx2;
      output_transform_generic(tr, in, point_stride, s.t, bias_o, yp + row * s.t);
    }
  });
  return y;
}

torch::Tensor winograd_conv1d_gated(const torch::Tensor& x, const torch::Tensor& u, const torch::Tensor& bias) {
  const Shape s = shape_of(x, u);
  TORCH_CHECK(s.c_out % 2 == 0, "winograd_conv1d_gated: odd output channels ", s.c_out);
  const int64_t h = s.c_out / 2;
  const PointProducts pp(x, u, s, bias);
  auto y = torch::empty({s.batch, h, s.t}, x.options());
  const Transforms& tr = transforms();
  const float *mp = pp.data, *bp = pp.bias_data;
  const int64_t point_stride = pp.point_stride;
  float* yp = y.data_ptr<float>();
  const bool avx2 = has_avx2();
  at::parallel_for(0, s.batch * h, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> a, b_row;
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / h, o = row % h;
      const float* in_a = mp + o * s.cols + b * s.tiles_padded;
      const float* in_b = mp + (o + h) * s.cols + b * s.tiles_padded;
      const float bias_a = bp ? bp[o] : 0.0f, bias_b = bp ? bp[o + h] : 0.0f;
      float* out = yp + row * s.t;
#ifdef MONOFLOW_WINOGRAD_X86
      if (avx2) {
        gated_transform_avx2(tr, in_a, in_b, point_stride, s.t, bias_a, bias_b, out);
        continue;
      }
#endif
      (void)avx2;
      a.resize(s.t);
      b_row.resize(s.t);
      output_transform_generic(tr, in_a, point_stride, s.t, bias_a, a.data());
      output_transform_generic(tr, in_b, point_stride, s.t, bias_b, b_row.data());
      for (int64_t i = 0; i < s.t; ++i) out[i] = simd::gate(a[i], b_row[i]);
    }
  });
  return y;
}

torch::Tensor winograd_rows_weight(const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 || (weight.dim() == 3 && weight.size(2) == 1),
              "winograd_rows_weight: expected [R, C] or [R, C, 1], got ", weight.sizes());
  const int64_t rows = weight.size(0), c = weight.size(1), padded = (rows + kRows - 1) / kRows * kRows;
  auto w = torch::zeros({padded, c}, torch::kFloat);
  w.slice(0, 0, rows).copy_(weight.detach().reshape({rows, c}));
  return w.reshape({padded / kRows, kRows, c}).transpose(1, 2).contiguous();
}

void winograd_wn_layer(const torch::Tensor& x, const torch::Tensor& u, const torch::Tensor& bias,
                       const torch::Tensor& rs_weight, const torch::Tensor& rs_bias, torch::Tensor residual,
                       torch::Tensor skip) {
  const Shape s = shape_of(x, u);
  const int64_t h = s.c_out / 2;
  const bool has_residual = residual.defined();
  const std::vector<int64_t> residual_shape{s.batch, h, s.t};
  TORCH_CHECK(skip.dim() == 3 && skip.size(0) == s.batch && skip.size(2) == s.t && skip.is_contiguous() &&
                  skip.scalar_type() == torch::kFloat,
              "winograd_wn_layer: skip must be contiguous float32 [", s.batch, ", S, ", s.t, "], got ", skip.sizes());
  TORCH_CHECK(!has_residual || (residual.sizes() == residual_shape && residual.is_contiguous() &&
                                residual.scalar_type() == torch::kFloat),
              "winograd_wn_layer: residual must be contiguous float32 [", s.batch, ", ", h, ", ", s.t, "]");
  const int64_t rows = (has_residual ? h : 0) + skip.size(1);
  TORCH_CHECK(rs_weight.dim() == 3 && rs_weight.size(1) == h && rs_weight.size(2) == kRows &&
                  rs_weight.size(0) == (rows + kRows - 1) / kRows,
              "winograd_wn_layer: res_skip weight ", rs_weight.sizes(), " is not winograd_rows_weight of [", rows,
              " rounded up to 6k, ", h, "]");
  TORCH_CHECK(rs_bias.numel() == rows, "winograd_wn_layer: res_skip bias has ", rs_bias.numel(), " values, expected ",
              rows);
  const PointProducts pp(x, u, s, bias);  // reads all of x: the residual may be x itself
  const Transforms& tr = transforms();
  const float *mp = pp.data, *bp = pp.bias_data;
  const int64_t point_stride = pp.point_stride;
  const auto rs_w = rs_weight.contiguous();
  const auto rs_b = rs_bias.contiguous();
  const float* wp = rs_w.data_ptr<float>();
  const float* rbp = rs_b.data_ptr<float>();
  float* res_p = has_residual ? residual.data_ptr<float>() : nullptr;
  float* skip_p = skip.data_ptr<float>();
  const int64_t blocks = (s.t + kBlockFrames - 1) / kBlockFrames;
  const bool avx2 = has_avx2();
  const bool avx512 = has_avx512();
  // Blocks of frames split between threads; each output value is one thread's sum. Last
  // block first: parallel_for gives the first threads one item more than the last, and the
  // short last block belongs with them (900 frames: 14 blocks and 4 frames against 14 blocks,
  // where in order it is 15 against 13 and 4 frames).
  at::parallel_for(0, s.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> packed(kBlockCols * h * kCols);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / blocks, j = blocks - 1 - item % blocks;
      const int64_t f0 = j * kBlockFrames, col0 = b * s.tiles_padded + j * kBlockTiles;
      const int64_t valid = std::min<int64_t>(kBlockFrames, s.t - f0);
      const RowTargets rt{res_p ? res_p + b * h * s.t : nullptr, skip_p + b * skip.size(1) * s.t, h, s.t, rows};
#ifdef MONOFLOW_WINOGRAD_X86
      if (avx2) {
        gated_block_avx2(tr, mp, s.cols, point_stride, col0, h, bp, packed.data());
        if (avx512) {
          rows_block_avx512(wp, packed.data(), h, rs_weight.size(0) * kRows, rbp, rt, f0, valid);
        } else {
          rows_block_avx2(wp, packed.data(), h, rs_weight.size(0) * kRows, rbp, rt, f0, valid);
        }
        continue;
      }
#endif
      (void)avx2, (void)avx512;
      gated_block_generic(tr, mp, s.cols, point_stride, col0, h, bp, packed.data());
      rows_block_generic(wp, packed.data(), h, rs_weight.size(0) * kRows, rbp, rt, f0, valid);
    }
  });
}

}  // namespace monoflow::models
