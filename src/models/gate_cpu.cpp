#include "models/gate_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>

#include "models/cpu_rows.h"
#include "models/simd_math.h"

namespace monoflow::models {

namespace {

// x viewed as rows of `frames` values: output row r (item r / h, channel r % h) gates input rows
// a(r) (channel r % h) and a(r) + h rows (channel h + r % h).
struct Rows {
  // x [B, 2H, ...]: H and the values per channel.
  static Rows of(const torch::Tensor& x) {
    const int64_t h = x.size(1) / 2;
    return {h, x.numel() / std::max<int64_t>(x.size(0) * 2 * h, 1)};
  }
  int64_t count(const torch::Tensor& x) const { return x.size(0) * h; }  // output rows
  int64_t h, frames;
  int64_t input(int64_t r) const { return ((r / h) * 2 * h + r % h) * frames; }
  int64_t output(int64_t r) const { return r * frames; }
  int64_t gate_offset() const { return h * frames; }
};

void forward_scalar(const float* a, const float* b, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = simd::gate(a[i], b[i]);
}

// d/da tanh(a) s = s (1 - t^2); d/db t sigmoid(b) = t s (1 - s).
void backward_scalar(const float* a, const float* b, const float* g, float* ga, float* gb, int64_t begin,
                     int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float t = std::tanh(a[i]), s = 1.0f / (1.0f + std::exp(-b[i]));
    ga[i] = g[i] * s * (1.0f - t * t);
    gb[i] = g[i] * t * s * (1.0f - s);
  }
}

#ifdef MONOFLOW_SIMD_X86
MONOFLOW_AVX2 int64_t forward_avx2(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, simd::gate_avx2(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  return i;
}

MONOFLOW_AVX2 int64_t backward_avx2(const float* a, const float* b, const float* g, float* ga, float* gb, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = simd::tanh_avx2(_mm256_loadu_ps(a + i));
    const __m256 s = simd::sigmoid_avx2(_mm256_loadu_ps(b + i));
    const __m256 gs = _mm256_mul_ps(_mm256_loadu_ps(g + i), s);
    _mm256_storeu_ps(ga + i, _mm256_mul_ps(gs, _mm256_fnmadd_ps(t, t, one)));
    _mm256_storeu_ps(gb + i, _mm256_mul_ps(_mm256_mul_ps(gs, t), _mm256_sub_ps(one, s)));
  }
  return i;
}
#endif

torch::Tensor gate_forward(const torch::Tensor& x_in) {
  const torch::Tensor x = x_in.contiguous();
  const Rows rows = Rows::of(x);
  auto sizes = x.sizes().vec();
  sizes[1] = rows.h;
  torch::Tensor out = torch::empty(sizes, x.options());
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  at::parallel_for(0, rows.count(x), rows_per_task(rows.frames), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* a = px + rows.input(r);
      float* o = po + rows.output(r);
      int64_t done = 0;
#ifdef MONOFLOW_SIMD_X86
      if (simd::cpu_has_avx2_fma()) done = forward_avx2(a, a + rows.gate_offset(), o, rows.frames);
#endif
      forward_scalar(a, a + rows.gate_offset(), o, done, rows.frames);
    }
  });
  return out;
}

torch::Tensor gate_backward(const torch::Tensor& x, const torch::Tensor& grad_in) {
  const torch::Tensor g = grad_in.contiguous();
  torch::Tensor grad_x = torch::empty_like(x);
  const Rows rows = Rows::of(x);
  const float* px = x.data_ptr<float>();
  const float* pg = g.data_ptr<float>();
  float* pgx = grad_x.data_ptr<float>();
  at::parallel_for(0, rows.count(x), rows_per_task(rows.frames), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* a = px + rows.input(r);
      const float* gr = pg + rows.output(r);
      float* ga = pgx + rows.input(r);
      int64_t done = 0;
#ifdef MONOFLOW_SIMD_X86
      if (simd::cpu_has_avx2_fma()) {
        done = backward_avx2(a, a + rows.gate_offset(), gr, ga, ga + rows.gate_offset(), rows.frames);
      }
#endif
      backward_scalar(a, a + rows.gate_offset(), gr, ga, ga + rows.gate_offset(), done, rows.frames);
    }
  });
  return grad_x;
}

class CpuGate : public torch::autograd::Function<CpuGate> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in) {
    RECORD_FUNCTION("monoflow::CpuGate", std::vector<c10::IValue>({x_in}));
    const torch::Tensor x = x_in.contiguous();
    ctx->save_for_backward({x});
    return gate_forward(x);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return {gate_backward(ctx->get_saved_variables()[0], grads[0])};
  }
};

}  // namespace

bool gate_cpu_applies(const torch::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == torch::kFloat && x.dim() >= 2 && x.size(1) % 2 == 0 &&
         x.layout() == torch::kStrided;
}

torch::Tensor gated_activation_cpu(const torch::Tensor& x) {
  TORCH_CHECK(gate_cpu_applies(x), "gated_activation_cpu: expected a float32 CPU tensor [B, 2H, ...], got ",
              x.scalar_type(), " ", x.sizes(), " on ", x.device());
  if (!x.requires_grad() || !torch::GradMode::is_enabled()) return gate_forward(x);
  return CpuGate::apply(x);
}

}  // namespace monoflow::models
