#include "models/mle_loss_cpu.h"

#include <ATen/record_function.h>

#include <cmath>
#include <vector>

#include "models/cpu_rows.h"
#include "models/simd_math.h"

namespace monoflow::models::cpu {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// One row's sums from element `begin` on: sum(l) and sum(exp(-2 l) (z - m)^2).
void row_sums_scalar(const float* z, const float* m, const float* l, int64_t begin, int64_t n, double& logs,
                     double& quad) {
  for (int64_t i = begin; i < n; ++i) {
    const float d = z[i] - m[i];
    logs += l[i];
    quad += std::exp(-2.0f * l[i]) * d * d;
  }
}

// The row's gradients from element `begin` on, s = the loss's gradient / the count:
// d/dz = s exp(-2 l) (z - m) = -d/dm, d/dl = s (1 - exp(-2 l) (z - m)^2).
void row_grads_scalar(const float* z, const float* m, const float* l, float s, float* gz, float* gm, float* gl,
                      int64_t begin, int64_t n) {
  for (int64_t i = begin; i < n; ++i) {
    const float d = z[i] - m[i], w = std::exp(-2.0f * l[i]);
    gz[i] = s * w * d;
    gm[i] = -gz[i];
    gl[i] = s * (1.0f - w * d * d);
  }
}

#ifdef MONOFLOW_SIMD_X86
// exp(-2 l) as exp(-l) squared: exp_avx2 clamps its input, but the square overflows to infinity
// and underflows to zero where float's exp(-2 l) does (a loss that overflows must stay
// non-finite, so that its step is skipped), and a NaN l gives NaN, as the composite's exp does.
MONOFLOW_AVX2 inline __m256 exp_minus_twice(__m256 l) {
  const __m256 e = simd::exp_avx2(_mm256_xor_ps(l, _mm256_set1_ps(-0.0f)));
  return _mm256_or_ps(_mm256_mul_ps(e, e), _mm256_cmp_ps(l, l, _CMP_UNORD_Q));
}

// Eight lanes of float sums per row (a row is at most a few thousand frames), then double.
MONOFLOW_AVX2 int64_t row_sums_avx2(const float* z, const float* m, const float* l, int64_t n, double& logs,
                                    double& quad) {
  __m256 sum_l = _mm256_setzero_ps(), sum_q = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 li = _mm256_loadu_ps(l + i);
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(z + i), _mm256_loadu_ps(m + i));
    const __m256 w = exp_minus_twice(li);
    sum_l = _mm256_add_ps(sum_l, li);
    sum_q = _mm256_fmadd_ps(_mm256_mul_ps(w, d), d, sum_q);
  }
  alignas(32) float lanes_l[8], lanes_q[8];
  _mm256_store_ps(lanes_l, sum_l);
  _mm256_store_ps(lanes_q, sum_q);
  for (int k = 0; k < 8; ++k) {
    logs += lanes_l[k];
    quad += lanes_q[k];
  }
  return i;
}

MONOFLOW_AVX2 int64_t row_grads_avx2(const float* z, const float* m, const float* l, float s, float* gz, float* gm,
                                     float* gl, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s), one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(z + i), _mm256_loadu_ps(m + i));
    const __m256 w = exp_minus_twice(_mm256_loadu_ps(l + i));
    const __m256 wd = _mm256_mul_ps(w, d);
    const __m256 g = _mm256_mul_ps(vs, wd);
    _mm256_storeu_ps(gz + i, g);
    _mm256_storeu_ps(gm + i, _mm256_xor_ps(g, sign));
    _mm256_storeu_ps(gl + i, _mm256_mul_ps(vs, _mm256_fnmadd_ps(wd, d, one)));
  }
  return i;
}
#endif

class MleLossCpu : public torch::autograd::Function<MleLossCpu> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& z_in, const torch::Tensor& m_in,
                               const torch::Tensor& l_in, const torch::Tensor& logdet, const torch::Tensor& z_mask) {
    RECORD_FUNCTION("monoflow::MleLossCpu", std::vector<c10::IValue>({z_in}));
    const torch::Tensor z = z_in.contiguous(), m = m_in.contiguous(), l = l_in.contiguous();
    const int64_t b = z.size(0), c = z.size(1), frames = z.size(2);
    const float *pz = z.data_ptr<float>(), *pm = m.data_ptr<float>(), *pl = l.data_ptr<float>();
    std::vector<double> row_total(static_cast<size_t>(b * c), 0.0);
    for_each_row(b, c, frames, [&](int64_t r, int64_t) {
      const int64_t at = r * frames;
      double logs = 0.0, quad = 0.0;
      int64_t done = 0;
#ifdef MONOFLOW_SIMD_X86
      if (simd::cpu_has_avx2_fma()) done = row_sums_avx2(pz + at, pm + at, pl + at, frames, logs, quad);
#endif
      row_sums_scalar(pz + at, pm + at, pl + at, done, frames, logs, quad);
      row_total[static_cast<size_t>(r)] = logs + 0.5 * quad;
    });
    double total = 0.0;
    for (const double t : row_total) total += t;  // in row order: the same for any thread count
    total -= logdet.sum(torch::kDouble).item<double>();
    const double count = static_cast<double>(c) * z_mask.sum(torch::kDouble).item<double>();
    ctx->save_for_backward({z, m, l});
    ctx->saved_data["count"] = count;
    ctx->saved_data["items"] = logdet.numel();
    return torch::scalar_tensor(total / count + 0.5 * std::log(2 * M_PI), z.options());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(), "mle_loss_cpu: no double backward (create_graph)");
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &z = saved[0], &m = saved[1], &l = saved[2];
    const double count = ctx->saved_data["count"].toDouble();
    const float s = static_cast<float>(grads[0].item<double>() / count);
    const int64_t b = z.size(0), c = z.size(1), frames = z.size(2);
    auto gz = torch::empty_like(z), gm = torch::empty_like(z), gl = torch::empty_like(z);
    const float *pz = z.data_ptr<float>(), *pm = m.data_ptr<float>(), *pl = l.data_ptr<float>();
    float *pgz = gz.data_ptr<float>(), *pgm = gm.data_ptr<float>(), *pgl = gl.data_ptr<float>();
    for_each_row(b, c, frames, [&](int64_t r, int64_t) {
      const int64_t at = r * frames;
      int64_t done = 0;
#ifdef MONOFLOW_SIMD_X86
      if (simd::cpu_has_avx2_fma()) done = row_grads_avx2(pz + at, pm + at, pl + at, s, pgz + at, pgm + at, pgl + at, frames);
#endif
      row_grads_scalar(pz + at, pm + at, pl + at, s, pgz + at, pgm + at, pgl + at, done, frames);
    });
    const auto grad_logdet = torch::full({ctx->saved_data["items"].toInt()}, -s, z.options());
    return {gz, gm, gl, grad_logdet, torch::Tensor()};
  }
};

}  // namespace

bool mle_loss_cpu_applies(const torch::Tensor& z, const torch::Tensor& z_m, const torch::Tensor& z_logs,
                          const torch::Tensor& logdet, const torch::Tensor& z_mask) {
  for (const auto* t : {&z, &z_m, &z_logs, &logdet, &z_mask}) {
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != torch::kFloat || t->layout() != torch::kStrided) {
      return false;
    }
  }
  return z.dim() == 3 && z_m.sizes() == z.sizes() && z_logs.sizes() == z.sizes() && logdet.dim() == 1 &&
         logdet.size(0) == z.size(0) && z_mask.dim() == 3 && z_mask.size(0) == z.size(0) && z_mask.size(1) == 1 &&
         z_mask.size(2) == z.size(2);
}

torch::Tensor mle_loss_cpu(const torch::Tensor& z, const torch::Tensor& z_m, const torch::Tensor& z_logs,
                           const torch::Tensor& logdet, const torch::Tensor& z_mask) {
  TORCH_CHECK(mle_loss_cpu_applies(z, z_m, z_logs, logdet, z_mask),
              "mle_loss_cpu: expected float32 CPU tensors z, z_m, z_logs [B, C, T], logdet [B], z_mask [B, 1, T]");
  return MleLossCpu::apply(z, z_m, z_logs, logdet, z_mask);
}

}  // namespace monoflow::models::cpu
