#include "models/flow_train_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "models/cpu_rows.h"
#include "models/flow_reverse_cpu.h"
#include "models/simd_math.h"

namespace monoflow::models::cpu {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The weight gradient's terms of one item and group: sums[i * n + j] = sum over t of
// g_i[t] * mask[t] * x_j[t], each in eight float lanes (frame t in lane t % 8, a fused
// multiply-add each), the lanes then added in order. Scalar and AVX2 give the same bits.
void weight_terms_scalar(const float* const* g, const float* const* x, const float* mask, int64_t n, int64_t frames,
                         double* sums) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float lanes[8] = {};
      for (int64_t t = 0; t < frames; ++t) lanes[t % 8] = std::fma(g[i][t] * mask[t], x[j][t], lanes[t % 8]);
      float total = 0.0f;
      for (float lane : lanes) total += lane;
      sums[i * n + j] = total;
    }
  }
}

#ifdef MONOFLOW_SIMD_X86
// n = 4 in AVX2: one pass over time per row i of the gradient, the four x rows beside it.
MONOFLOW_AVX2 void weight_terms_four_avx2(const float* const* g, const float* const* x, const float* mask,
                                          int64_t frames, double* sums) {
  const int64_t whole = frames - frames % 8;
  for (int i = 0; i < 4; ++i) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t t = 0; t < whole; t += 8) {
      const __m256 gm = _mm256_mul_ps(_mm256_loadu_ps(g[i] + t), _mm256_loadu_ps(mask + t));
      for (int j = 0; j < 4; ++j) acc[j] = _mm256_fmadd_ps(gm, _mm256_loadu_ps(x[j] + t), acc[j]);
    }
    for (int j = 0; j < 4; ++j) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[j]);
      for (int64_t t = whole; t < frames; ++t) lanes[t % 8] = std::fma(g[i][t] * mask[t], x[j][t], lanes[t % 8]);
      float total = 0.0f;
      for (float lane : lanes) total += lane;
      sums[i * 4 + j] = total;
    }
  }
}
#endif

#ifdef MONOFLOW_SIMD_X86
// exp over eight values at a time; returns how many it did.
MONOFLOW_AVX2 int64_t exp_row_avx2(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, simd::exp_avx2(_mm256_loadu_ps(in + i)));
  return i;
}
#endif

// grad_weight [n, n] = sum over items, groups and frames of (grad * mask)_i x_j in the official
// view: each (item, group) task's terms, then the tasks' in order.
torch::Tensor weight_grad(const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& x_mask, int64_t n) {
  const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2), groups = channels / n;
  const std::vector<int64_t> offset = invconv_rows(channels, frames, n);
  std::vector<double> terms(static_cast<size_t>(batch * groups * n * n));
  const float *pg = grad.data_ptr<float>(), *px = x.data_ptr<float>(), *pm = x_mask.data_ptr<float>();
  at::parallel_for(0, batch * groups, rows_per_task(frames * n), [&](int64_t begin, int64_t end) {
    std::vector<const float*> g_rows(n), x_rows(n);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / groups, group = task % groups;
      for (int64_t k = 0; k < n; ++k) {
        g_rows[k] = pg + b * channels * frames + offset[group * n + k];
        x_rows[k] = px + b * channels * frames + offset[group * n + k];
      }
      double* sums = terms.data() + task * n * n;
#ifdef MONOFLOW_SIMD_X86
      if (n == 4 && simd::cpu_has_avx2_fma()) {
        weight_terms_four_avx2(g_rows.data(), x_rows.data(), pm + b * frames, frames, sums);
        continue;
      }
#endif
      weight_terms_scalar(g_rows.data(), x_rows.data(), pm + b * frames, n, frames, sums);
    }
  });
  std::vector<double> total(static_cast<size_t>(n * n), 0.0);
  for (int64_t task = 0; task < batch * groups; ++task) {
    for (int64_t e = 0; e < n * n; ++e) total[e] += terms[task * n * n + e];
  }
  auto out = torch::empty({n, n}, x.options());
  for (int64_t e = 0; e < n * n; ++e) out.data_ptr<float>()[e] = static_cast<float>(total[e]);
  return out;
}

class InvConvMixCpu : public torch::autograd::Function<InvConvMixCpu> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& weight,
                               const torch::Tensor& x_mask_in) {
    RECORD_FUNCTION("monoflow::InvConvMixCpu", std::vector<c10::IValue>({x_in, weight}));
    const torch::Tensor x = x_in.contiguous(), x_mask = x_mask_in.contiguous();
    ctx->save_for_backward({x, weight, x_mask});
    return invconv_mix_kernel(x, weight, x_mask);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &x_mask = saved[2];
    const torch::Tensor grad = grads[0].to(torch::kFloat).contiguous();
    torch::Tensor grad_x, grad_weight;
    // y = (W x) * mask per group: x's gradient is W^T (grad * mask) = (W^T grad) * mask.
    if (ctx->needs_input_grad(0)) grad_x = invconv_mix_kernel(grad, weight.t(), x_mask);
    if (ctx->needs_input_grad(1)) grad_weight = weight_grad(grad, x, x_mask, weight.size(0)).to(weight.scalar_type());
    return {grad_x, grad_weight, torch::Tensor()};
  }
};

// exp over a row: eight lanes of AVX2 where the CPU has them, std::exp for the rest.
void exp_row(const float* in, float* out, int64_t n) {
  int64_t i = 0;
#ifdef MONOFLOW_SIMD_X86
  if (simd::cpu_has_avx2_fma()) i = exp_row_avx2(in, out, n);
#endif
  for (; i < n; ++i) out[i] = std::exp(in[i]);
}

// The coupling's rows: channel c of the first half (x_0, z_0; m in m_and_logs) and of the
// second (x_1, z_1; logs), each T frames, as offsets.
struct CouplingRows {
  int64_t channels, frames, half;
  int64_t first(int64_t b, int64_t c) const { return (b * channels + c) * frames; }
  int64_t second(int64_t b, int64_t c) const { return (b * channels + half + c) * frames; }
};

// f(b, c, r, scale) for each row pair r = b * half + c of the coupling, with scale = exp(logs) of
// that row; the pairs split between at::parallel_for's tasks, each pair wholly in one.
template <typename F>
void for_each_coupling_row(const CouplingRows& rows, int64_t batch, const float* logs, F&& f) {
  at::parallel_for(0, batch * rows.half, rows_per_task(2 * rows.frames), [&](int64_t begin, int64_t end) {
    std::vector<float> scale(static_cast<size_t>(rows.frames));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / rows.half, c = r % rows.half;
      exp_row(logs + rows.second(b, c), scale.data(), rows.frames);
      f(b, c, r, scale.data());
    }
  });
}

class CouplingAffineCpu : public torch::autograd::Function<CouplingAffineCpu> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& ml_in,
                             const torch::Tensor& mask_in) {
    RECORD_FUNCTION("monoflow::CouplingAffineCpu", std::vector<c10::IValue>({x_in, ml_in}));
    const torch::Tensor x = x_in.contiguous(), ml = ml_in.contiguous(), mask = mask_in.contiguous();
    const int64_t batch = x.size(0), frames = x.size(2);
    const CouplingRows rows{x.size(1), frames, x.size(1) / 2};
    torch::Tensor z = torch::empty_like(x);
    std::vector<double> row_logdet(static_cast<size_t>(batch * rows.half));
    const float *px = x.data_ptr<float>(), *pml = ml.data_ptr<float>(), *pm = mask.data_ptr<float>();
    float* pz = z.data_ptr<float>();
    for_each_coupling_row(rows, batch, pml, [&](int64_t b, int64_t c, int64_t r, const float* scale) {
      std::memcpy(pz + rows.first(b, c), px + rows.first(b, c), static_cast<size_t>(frames) * sizeof(float));
      const float *x1 = px + rows.second(b, c), *m = pml + rows.first(b, c), *logs = pml + rows.second(b, c);
      const float* mask_row = pm + b * frames;
      float* z1 = pz + rows.second(b, c);
      double sum = 0.0;
      for (int64_t t = 0; t < frames; ++t) {
        z1[t] = (m[t] + scale[t] * x1[t]) * mask_row[t];
        sum += static_cast<double>(logs[t] * mask_row[t]);
      }
      row_logdet[r] = sum;
    });
    torch::Tensor logdet = torch::empty({batch}, x.options());
    for (int64_t b = 0; b < batch; ++b) {
      double sum = 0.0;
      for (int64_t c = 0; c < rows.half; ++c) sum += row_logdet[b * rows.half + c];
      logdet.data_ptr<float>()[b] = static_cast<float>(sum);
    }
    ctx->save_for_backward({x, ml, mask});
    return {z, logdet};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &ml = saved[1], &mask = saved[2];
    const int64_t batch = x.size(0), frames = x.size(2);
    const CouplingRows rows{x.size(1), frames, x.size(1) / 2};
    const torch::Tensor grad_z = grads[0].defined() ? grads[0].to(torch::kFloat).contiguous() : torch::zeros_like(x);
    const torch::Tensor grad_logdet =
        grads[1].defined() ? grads[1].to(torch::kFloat).contiguous() : torch::zeros({batch}, x.options());
    torch::Tensor grad_x = torch::empty_like(x), grad_ml = torch::empty_like(ml);
    const float *px = x.data_ptr<float>(), *pml = ml.data_ptr<float>(), *pm = mask.data_ptr<float>();
    const float *pgz = grad_z.data_ptr<float>(), *pgl = grad_logdet.data_ptr<float>();
    float *pgx = grad_x.data_ptr<float>(), *pgml = grad_ml.data_ptr<float>();
    for_each_coupling_row(rows, batch, pml, [&](int64_t b, int64_t c, int64_t, const float* scale) {
      // x_0 passes through: its gradient is z_0's.
      std::memcpy(pgx + rows.first(b, c), pgz + rows.first(b, c), static_cast<size_t>(frames) * sizeof(float));
      const float *x1 = px + rows.second(b, c), *gz1 = pgz + rows.second(b, c);
      const float* mask_row = pm + b * frames;
      float *gx1 = pgx + rows.second(b, c), *gm = pgml + rows.first(b, c), *glogs = pgml + rows.second(b, c);
      const float g_det = pgl[b];
      for (int64_t t = 0; t < frames; ++t) {
        const float g = gz1[t] * mask_row[t];  // z_1's gradient through the mask
        gx1[t] = g * scale[t];
        gm[t] = g;
        glogs[t] = g * scale[t] * x1[t] + g_det * mask_row[t];
      }
    });
    return {grad_x, grad_ml, torch::Tensor()};
  }
};

// ActNorm's forward map y = (bias + exp(logs) * x) * mask, one pass each way. The scale is one
// float exp per channel and each value's product, sum and mask the reference's three float ops
// in their order, so y equals the reference's bits. The gradients of logs and bias sum each
// (item, channel) row in eight float lanes and those in double, then the rows of a channel in
// item order: the same bits for any thread count.
class ActNormAffineCpu : public torch::autograd::Function<ActNormAffineCpu> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& logs_in,
                               const torch::Tensor& bias_in, const torch::Tensor& mask_in) {
    RECORD_FUNCTION("monoflow::ActNormAffineCpu", std::vector<c10::IValue>({x_in}));
    const torch::Tensor x = x_in.contiguous(), mask = mask_in.contiguous();
    const torch::Tensor scale = torch::exp(logs_in.detach()).reshape({-1}).contiguous();
    const torch::Tensor bias = bias_in.detach().reshape({-1}).contiguous();
    const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2);
    torch::Tensor y = torch::empty_like(x);
    const float *px = x.data_ptr<float>(), *ps = scale.data_ptr<float>(), *pb = bias.data_ptr<float>();
    const float* pm = mask.data_ptr<float>();
    float* py = y.data_ptr<float>();
    for_each_row(batch, channels, frames, [&](int64_t r, int64_t item) {
      const float s = ps[r % channels], b = pb[r % channels];
      const float *xr = px + r * frames, *m = pm + item * frames;
      float* yr = py + r * frames;
      for (int64_t t = 0; t < frames; ++t) yr[t] = (b + s * xr[t]) * m[t];
    });
    ctx->save_for_backward({x, scale, mask});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &scale = saved[1], &mask = saved[2];
    const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2);
    const torch::Tensor grad_y = grads[0].to(torch::kFloat).contiguous();
    torch::Tensor grad_x = torch::empty_like(x);
    std::vector<double> row_bias(static_cast<size_t>(batch * channels)), row_scale(row_bias.size());
    const float *px = x.data_ptr<float>(), *ps = scale.data_ptr<float>(), *pm = mask.data_ptr<float>();
    const float* pg = grad_y.data_ptr<float>();
    float* pgx = grad_x.data_ptr<float>();
    for_each_row(batch, channels, frames, [&](int64_t r, int64_t item) {
      const float s = ps[r % channels];
      const float *xr = px + r * frames, *gr = pg + r * frames, *m = pm + item * frames;
      float* gxr = pgx + r * frames;
      // Eight float lanes each (frame t in lane t % 8, which the compiler vectorises), added in
      // order in double at the row's end: one thread's row, the same bits for any split.
      float lanes_g[8] = {}, lanes_gx[8] = {};
      int64_t t = 0;
      for (; t + 8 <= frames; t += 8) {
        for (int k = 0; k < 8; ++k) {
          const float g = gr[t + k] * m[t + k];  // through the mask
          gxr[t + k] = g * s;
          lanes_g[k] += g;
          lanes_gx[k] += g * xr[t + k];
        }
      }
      double sum_g = 0.0, sum_gx = 0.0;
      for (; t < frames; ++t) {
        const float g = gr[t] * m[t];
        gxr[t] = g * s;
        sum_g += g;
        sum_gx += static_cast<double>(g * xr[t]);
      }
      for (int k = 0; k < 8; ++k) {
        sum_g += lanes_g[k];
        sum_gx += lanes_gx[k];
      }
      row_bias[r] = sum_g;
      row_scale[r] = sum_gx;
    });
    torch::Tensor grad_logs = torch::empty({1, channels, 1}, x.options());
    torch::Tensor grad_bias = torch::empty({1, channels, 1}, x.options());
    for (int64_t c = 0; c < channels; ++c) {
      double sum_g = 0.0, sum_gx = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        sum_g += row_bias[b * channels + c];
        sum_gx += row_scale[b * channels + c];
      }
      grad_bias.data_ptr<float>()[c] = static_cast<float>(sum_g);
      grad_logs.data_ptr<float>()[c] = static_cast<float>(sum_gx * ps[c]);  // d exp(logs) = exp(logs)
    }
    return {grad_x, grad_logs, grad_bias, torch::Tensor()};
  }
};

}  // namespace

bool coupling_train_applies(const torch::Tensor& x, const torch::Tensor& m_and_logs, const torch::Tensor& x_mask) {
  return torch::GradMode::is_enabled() && cpu_float_rows(x, x_mask) && x.size(1) % 2 == 0 &&
         m_and_logs.device().is_cpu() && m_and_logs.scalar_type() == torch::kFloat && m_and_logs.sizes() == x.sizes();
}

std::pair<torch::Tensor, torch::Tensor> coupling_affine_train(const torch::Tensor& x, const torch::Tensor& m_and_logs,
                                                              const torch::Tensor& x_mask) {
  TORCH_CHECK(coupling_train_applies(x, m_and_logs, x_mask), "coupling_affine_train: expected float32 CPU x and "
              "m_and_logs [B, C, T] (C even) and x_mask [B, 1, T] while autograd records, got ", x.sizes(), ", ",
              m_and_logs.sizes(), " and ", x_mask.sizes());
  auto out = CouplingAffineCpu::apply(x, m_and_logs, x_mask);
  return {out[0], out[1]};
}

bool actnorm_train_applies(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                           const torch::Tensor& x_mask) {
  if (!torch::GradMode::is_enabled() || !cpu_float_rows(x, x_mask)) return false;
  const std::vector<int64_t> per_channel{1, x.size(1), 1};
  for (const auto* p : {&logs, &bias}) {
    if (!p->device().is_cpu() || p->scalar_type() != torch::kFloat || p->sizes() != per_channel) return false;
  }
  return true;
}

torch::Tensor actnorm_affine_train(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                                   const torch::Tensor& x_mask) {
  TORCH_CHECK(actnorm_train_applies(x, logs, bias, x_mask), "actnorm_affine_train: expected float32 CPU x [B, C, T], "
              "logs and bias [1, C, 1] and x_mask [B, 1, T] while autograd records, got ", x.sizes(), ", ",
              logs.sizes(), ", ", bias.sizes(), " and ", x_mask.sizes());
  return ActNormAffineCpu::apply(x, logs, bias, x_mask);
}

bool invconv_train_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask) {
  if (!torch::GradMode::is_enabled() || !cpu_float_rows(x, x_mask)) return false;
  const int64_t n = weight.dim() == 2 ? weight.size(0) : 0;
  return weight.device().is_cpu() && weight.scalar_type() == torch::kFloat && n > 0 && weight.size(1) == n &&
         n % 2 == 0 && x.size(1) % n == 0;
}

torch::Tensor invconv_mix_train(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask) {
  TORCH_CHECK(invconv_train_applies(x, weight, x_mask), "invconv_mix_train: expected float32 CPU x [B, C, T], "
              "weight [n, n] (n even, dividing C) and x_mask [B, 1, T] while autograd records, got ", x.sizes(), ", ",
              weight.sizes(), " and ", x_mask.sizes());
  return InvConvMixCpu::apply(x, weight, x_mask);
}

}  // namespace monoflow::models::cpu
