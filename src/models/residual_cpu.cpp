#include "models/residual_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "models/cpu_rows.h"
#include "models/flow_reverse_cpu.h"
#include "models/optional_tensor.h"

namespace monoflow::models::cpu {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Where res_skip [B, 2H, T]'s res row of item `item`, channel c starts (its skip row: H rows on).
int64_t res_row(int64_t item, int64_t c, int64_t h, int64_t frames) { return (item * 2 * h + c) * frames; }

// out = (x + res) * m over one row (x may be nullptr: zero).
void masked_row(const float* x, const float* res, const float* m, float* out, int64_t frames) {
  if (x) {
    for (int64_t t = 0; t < frames; ++t) out[t] = (x[t] + res[t]) * m[t];
  } else {
    for (int64_t t = 0; t < frames; ++t) out[t] = res[t] * m[t];
  }
}

// grad * mask for a [B, C, T] gradient (undefined: zero).
torch::Tensor masked_grad(const torch::Tensor& grad, const torch::Tensor& mask, at::IntArrayRef sizes) {
  if (!grad.defined()) return torch::zeros(sizes, mask.options());
  const torch::Tensor g = grad.contiguous();
  auto out = torch::empty(sizes, mask.options());
  const int64_t b = sizes[0], c = sizes[1], frames = sizes[2];
  const float *pg = g.data_ptr<float>(), *pm = mask.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for_each_row(b, c, frames, [&](int64_t r, int64_t item) {
    masked_row(nullptr, pg + r * frames, pm + item * frames, po + r * frames, frames);
  });
  return out;
}

class ResidualSkipCpu : public torch::autograd::Function<ResidualSkipCpu> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& skip_in,
                             const torch::Tensor& res_skip_in, const torch::Tensor& x_mask) {
    RECORD_FUNCTION("monoflow::ResidualSkipCpu", std::vector<c10::IValue>({x_in, res_skip_in}));
    const torch::Tensor x = x_in.contiguous(), skip = skip_in.contiguous(), res_skip = res_skip_in.contiguous();
    const torch::Tensor mask = x_mask.contiguous();
    const int64_t b = x.size(0), h = x.size(1), frames = x.size(2);
    auto x_out = torch::empty_like(x), skip_out = torch::empty_like(x);
    const float *px = x.data_ptr<float>(), *ps = skip.data_ptr<float>(), *prs = res_skip.data_ptr<float>(),
                *pm = mask.data_ptr<float>();
    float *pxo = x_out.data_ptr<float>(), *pso = skip_out.data_ptr<float>();
    for_each_row(b, h, frames, [&](int64_t r, int64_t item) {
      const int64_t row = r * frames, res = res_row(item, r % h, h, frames), skip_half = res + h * frames;
      masked_row(px + row, prs + res, pm + item * frames, pxo + row, frames);
      for (int64_t t = 0; t < frames; ++t) pso[row + t] = ps[row + t] + prs[skip_half + t];
    });
    ctx->save_for_backward({mask});
    ctx->set_materialize_grads(false);
    return {x_out, skip_out};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor mask = ctx->get_saved_variables()[0];
    const torch::Tensor& gx = grads[0];
    const torch::Tensor& gs = grads[1];
    const torch::IntArrayRef sizes = gx.defined() ? gx.sizes() : gs.sizes();
    const int64_t b = sizes[0], h = sizes[1], frames = sizes[2];
    // grad_res_skip = [gx * mask, gs]; grad_x is its first half's values, grad_skip_sum gs itself.
    auto grad_res_skip = torch::empty({b, 2 * h, frames}, mask.options());
    auto grad_x = masked_grad(gx, mask, sizes);
    const torch::Tensor g_skip = gs.defined() ? gs.contiguous() : torch::zeros(sizes, mask.options());
    const float *pgx = grad_x.data_ptr<float>(), *pgs = g_skip.data_ptr<float>();
    float* prs = grad_res_skip.data_ptr<float>();
    for_each_row(b, h, frames, [&](int64_t r, int64_t item) {
      const int64_t row = r * frames, res = res_row(item, r % h, h, frames);
      std::copy(pgx + row, pgx + row + frames, prs + res);
      std::copy(pgs + row, pgs + row + frames, prs + res + h * frames);
    });
    return {grad_x, g_skip, grad_res_skip, torch::Tensor()};
  }
};

class MaskedSumCpu : public torch::autograd::Function<MaskedSumCpu> {
 public:
  // x: float [B, H, T] or an empty tensor (none).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& res_in,
                               const torch::Tensor& x_mask) {
    RECORD_FUNCTION("monoflow::MaskedSumCpu", std::vector<c10::IValue>({res_in}));
    const bool has_x = is_given(x_in);
    const torch::Tensor x = has_x ? x_in.contiguous() : x_in, res = res_in.contiguous(), mask = x_mask.contiguous();
    const int64_t b = res.size(0), h = res.size(1), frames = res.size(2);
    auto out = torch::empty_like(res);
    const float *px = has_x ? x.data_ptr<float>() : nullptr, *pr = res.data_ptr<float>(), *pm = mask.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for_each_row(b, h, frames, [&](int64_t r, int64_t item) {
      masked_row(px ? px + r * frames : nullptr, pr + r * frames, pm + item * frames, po + r * frames, frames);
    });
    ctx->save_for_backward({mask});
    ctx->saved_data["has_x"] = has_x;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor mask = ctx->get_saved_variables()[0];
    auto grad = masked_grad(grads[0], mask, grads[0].sizes());
    // x and res get the same gradient: one tensor for both (autograd copies before adding to it).
    return {ctx->saved_data["has_x"].toBool() ? grad : torch::Tensor(), grad, torch::Tensor()};
  }
};

}  // namespace

bool residual_skip_cpu_applies(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                               const torch::Tensor& x_mask) {
  return cpu_float_rows(x, x_mask) && cpu_float_rows(skip_sum, x_mask) && skip_sum.sizes() == x.sizes() &&
         cpu_float_rows(res_skip, x_mask) && res_skip.size(1) == 2 * x.size(1);
}

ResidualSkipOutput residual_skip_cpu(const torch::Tensor& x, const torch::Tensor& skip_sum,
                                     const torch::Tensor& res_skip, const torch::Tensor& x_mask) {
  TORCH_CHECK(residual_skip_cpu_applies(x, skip_sum, res_skip, x_mask),
              "residual_skip_cpu: expected float32 CPU x, skip_sum [B, H, T], res_skip [B, 2H, T], x_mask [B, 1, T]");
  const auto out = ResidualSkipCpu::apply(x, skip_sum, res_skip, x_mask);
  return {out[0], out[1], out[0]};
}

bool masked_sum_cpu_applies(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& x_mask) {
  return cpu_float_rows(res, x_mask) && (!x.defined() || (cpu_float_rows(x, x_mask) && x.sizes() == res.sizes()));
}

torch::Tensor masked_sum_cpu(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& x_mask) {
  TORCH_CHECK(masked_sum_cpu_applies(x, res, x_mask),
              "masked_sum_cpu: expected float32 CPU res [B, H, T], x like it or undefined, x_mask [B, 1, T]");
  return MaskedSumCpu::apply(or_none(x, res.options()), res, x_mask);
}

}  // namespace monoflow::models::cpu
