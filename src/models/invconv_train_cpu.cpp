#include "models/invconv_train_cpu.h"

#include <ATen/Parallel.h>

#include <cmath>
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

// grad_weight [n, n] = sum over items, groups and frames of (grad * mask)_i x_j in the official
// view: each (item, group) task's terms, then the tasks' in order.
torch::Tensor weight_grad(const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& x_mask, int64_t n) {
  const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2), groups = channels / n;
  std::vector<int64_t> offset = invconv_channels(channels, n);
  for (auto& o : offset) o *= frames;
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

}  // namespace

bool invconv_train_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask) {
  if (!torch::GradMode::is_enabled() || !x.device().is_cpu() || x.scalar_type() != torch::kFloat || x.dim() != 3) {
    return false;
  }
  if (!x_mask.device().is_cpu() || x_mask.scalar_type() != torch::kFloat || x_mask.dim() != 3 ||
      x_mask.size(0) != x.size(0) || x_mask.size(1) != 1 || x_mask.size(2) != x.size(2)) {
    return false;
  }
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
