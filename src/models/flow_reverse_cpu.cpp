#include "models/flow_reverse_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "models/cpu_rows.h"
#include "models/simd_math.h"

namespace monoflow::models::cpu {

namespace {

void check(const torch::Tensor& x, const torch::Tensor& x_mask, const char* what) {
  TORCH_CHECK(flow_reverse_applies(x, x_mask), what, ": expected float32 CPU x [B, C, T] and x_mask [B, 1, T] outside "
              "autograd, got ", x.sizes(), " and ", x_mask.sizes());
}

// o[i] = (x[i] - m[i]) * exp(-l[i]) * mask[i] for i in [begin, end).
void coupling_row_scalar(const float* x, const float* m, const float* l, const float* mask, float* o, int64_t begin,
                         int64_t end) {
  for (int64_t i = begin; i < end; ++i) o[i] = (x[i] - m[i]) * std::exp(-l[i]) * mask[i];
}

#ifdef MONOFLOW_SIMD_X86
// The same over eight values at a time; returns how many it did.
MONOFLOW_AVX2 int64_t coupling_row_avx2(const float* x, const float* m, const float* l, const float* mask, float* o,
                                        int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 scale = simd::exp_avx2(_mm256_sub_ps(zero, _mm256_loadu_ps(l + i)));
    const __m256 shifted = _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(m + i));
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(shifted, scale), _mm256_loadu_ps(mask + i)));
  }
  return i;
}
#endif

// Four rows mixed by w [4, 4] and masked, in one pass over time: frames [begin, end) here.
void mix_four_scalar(const float* const* x, const float* w, const float* mask, float* const* o, int64_t begin,
                     int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const float a = x[0][t], b = x[1][t], c = x[2][t], d = x[3][t];
    for (int k = 0; k < 4; ++k) {
      o[k][t] = (w[4 * k] * a + w[4 * k + 1] * b + w[4 * k + 2] * c + w[4 * k + 3] * d) * mask[t];
    }
  }
}

#ifdef MONOFLOW_SIMD_X86
// The same over eight frames at a time; returns how many frames it did.
MONOFLOW_AVX2 int64_t mix_four_avx2(const float* const* x, const float* w, const float* mask, float* const* o,
                                    int64_t frames) {
  __m256 v[16];
  for (int i = 0; i < 16; ++i) v[i] = _mm256_set1_ps(w[i]);
  int64_t t = 0;
  for (; t + 8 <= frames; t += 8) {
    const __m256 a = _mm256_loadu_ps(x[0] + t), b = _mm256_loadu_ps(x[1] + t), c = _mm256_loadu_ps(x[2] + t),
                 d = _mm256_loadu_ps(x[3] + t), m = _mm256_loadu_ps(mask + t);
    for (int k = 0; k < 4; ++k) {
      // the scalar body's order: ((w0 a + w1 b) + w2 c) + w3 d, then the mask
      __m256 sum = _mm256_add_ps(_mm256_mul_ps(v[4 * k], a), _mm256_mul_ps(v[4 * k + 1], b));
      sum = _mm256_add_ps(sum, _mm256_mul_ps(v[4 * k + 2], c));
      sum = _mm256_add_ps(sum, _mm256_mul_ps(v[4 * k + 3], d));
      _mm256_storeu_ps(o[k] + t, _mm256_mul_ps(sum, m));
    }
  }
  return t;
}
#endif

}  // namespace

bool cpu_float_rows(const torch::Tensor& x, const torch::Tensor& x_mask) {
  return x.device().is_cpu() && x.scalar_type() == torch::kFloat && x.dim() == 3 && x_mask.device().is_cpu() &&
         x_mask.scalar_type() == torch::kFloat && x_mask.dim() == 3 && x_mask.size(0) == x.size(0) &&
         x_mask.size(1) == 1 && x_mask.size(2) == x.size(2);
}

bool flow_reverse_applies(const torch::Tensor& x, const torch::Tensor& x_mask) {
  return !torch::GradMode::is_enabled() && cpu_float_rows(x, x_mask);
}

torch::Tensor actnorm_reverse(const torch::Tensor& x_in, const torch::Tensor& logs, const torch::Tensor& bias,
                              const torch::Tensor& x_mask_in) {
  check(x_in, x_mask_in, "actnorm_reverse");
  const torch::Tensor x = x_in.contiguous(), x_mask = x_mask_in.contiguous();
  const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2);
  TORCH_CHECK(logs.numel() == channels && bias.numel() == channels, "actnorm_reverse: logs and bias need ", channels,
              " values");
  // exp(-logs) by torch, as the reference computes it: the same scale to the bit.
  const torch::Tensor scale = torch::exp(-logs).to(torch::kFloat).contiguous().view({channels});
  const torch::Tensor shift = bias.to(torch::kFloat).contiguous().view({channels});
  torch::Tensor out = torch::empty_like(x);
  const float *px = x.data_ptr<float>(), *pm = x_mask.data_ptr<float>();
  const float *ps = scale.data_ptr<float>(), *pb = shift.data_ptr<float>();
  float* po = out.data_ptr<float>();
  at::parallel_for(0, batch * channels, rows_per_task(frames), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r % channels;
      const float s = ps[c], b = pb[c];
      const float* xr = px + r * frames;
      const float* mr = pm + (r / channels) * frames;
      float* orow = po + r * frames;
      for (int64_t t = 0; t < frames; ++t) orow[t] = (xr[t] - b) * s * mr[t];
    }
  });
  return out;
}

std::vector<int64_t> invconv_rows(int64_t channels, int64_t frames, int64_t n) {
  const int64_t groups = channels / n, half = n / 2;
  std::vector<int64_t> offset(static_cast<size_t>(groups * n));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t k = 0; k < n; ++k) offset[g * n + k] = ((k / half) * (channels / 2) + g * half + k % half) * frames;
  }
  return offset;
}

torch::Tensor invconv_mix(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask) {
  check(x, x_mask, "invconv_mix");
  return invconv_mix_kernel(x, weight, x_mask);
}

torch::Tensor invconv_mix_kernel(const torch::Tensor& x_in, const torch::Tensor& weight, const torch::Tensor& x_mask_in) {
  const torch::Tensor x = x_in.contiguous(), x_mask = x_mask_in.contiguous();
  const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2), n = weight.size(0);
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == n && n % 2 == 0 && channels % n == 0,
              "invconv_mix: weight [n, n] with n even and dividing ", channels, ", got ", weight.sizes());
  const torch::Tensor w = weight.detach().to(torch::kFloat).contiguous();
  const int64_t groups = channels / n;
  const std::vector<int64_t> offset = invconv_rows(channels, frames, n);
  torch::Tensor out = torch::empty_like(x);
  const float *px = x.data_ptr<float>(), *pm = x_mask.data_ptr<float>(), *pw = w.data_ptr<float>();
  float* po = out.data_ptr<float>();
  at::parallel_for(0, batch * groups, rows_per_task(frames * n), [&](int64_t begin, int64_t end) {
    std::vector<const float*> in(n);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / groups, g = task % groups;
      const float* mr = pm + b * frames;
      for (int64_t k = 0; k < n; ++k) in[k] = px + b * channels * frames + offset[g * n + k];
      if (n == 4) {  // the official n_split: one pass, four rows in and out
        float* o[4];
        for (int64_t k = 0; k < 4; ++k) o[k] = po + b * channels * frames + offset[g * n + k];
        int64_t done = 0;
#ifdef MONOFLOW_SIMD_X86
        if (simd::cpu_has_avx2_fma()) done = mix_four_avx2(in.data(), pw, mr, o, frames);
#endif
        mix_four_scalar(in.data(), pw, mr, o, done, frames);
        continue;
      }
      // Any other n row by row (n + 1 short passes in L1), which the compiler vectorizes over time.
      for (int64_t k = 0; k < n; ++k) {
        float* orow = po + b * channels * frames + offset[g * n + k];
        const float* wk = pw + k * n;
        const float* x0 = in[0];
        for (int64_t t = 0; t < frames; ++t) orow[t] = wk[0] * x0[t];
        for (int64_t j = 1; j < n; ++j) {
          const float wj = wk[j];
          const float* xj = in[j];
          for (int64_t t = 0; t < frames; ++t) orow[t] += wj * xj[t];
        }
        for (int64_t t = 0; t < frames; ++t) orow[t] *= mr[t];
      }
    }
  });
  return out;
}

torch::Tensor coupling_reverse(const torch::Tensor& x_in, const torch::Tensor& m_and_logs_in,
                               const torch::Tensor& x_mask_in) {
  check(x_in, x_mask_in, "coupling_reverse");
  const torch::Tensor x = x_in.contiguous(), x_mask = x_mask_in.contiguous();
  const torch::Tensor ml = m_and_logs_in.to(torch::kFloat).contiguous();
  TORCH_CHECK(ml.sizes() == x.sizes() && x.size(1) % 2 == 0, "coupling_reverse: m_and_logs ", ml.sizes(),
              " must match x ", x.sizes(), " (an even channel count)");
  const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2), half = channels / 2;
  torch::Tensor out = torch::empty_like(x);
  const float *px = x.data_ptr<float>(), *pml = ml.data_ptr<float>(), *pm = x_mask.data_ptr<float>();
  float* po = out.data_ptr<float>();
  // Row r of an item: x_0's rows are copied, x_1's (r >= half) transformed.
  at::parallel_for(0, batch * channels, rows_per_task(frames), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / channels, c = r % channels;
      const float* xr = px + r * frames;
      float* orow = po + r * frames;
      if (c < half) {
        std::memcpy(orow, xr, static_cast<size_t>(frames) * sizeof(float));
        continue;
      }
      const float* m = pml + (b * channels + c - half) * frames;
      const float* l = pml + r * frames;
      const float* mask = pm + b * frames;
      int64_t done = 0;
#ifdef MONOFLOW_SIMD_X86
      if (simd::cpu_has_avx2_fma()) done = coupling_row_avx2(xr, m, l, mask, orow, frames);
#endif
      coupling_row_scalar(xr, m, l, mask, orow, done, frames);
    }
  });
  return out;
}

}  // namespace monoflow::models::cpu
