#include "models/wn_fused_cuda.h"

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "models/cuda_dispatch.h"
#include "models/kernels/wn_kernels.h"
#include "models/philox_state_cuda.h"
#include "models/wn_fused.h"

namespace monoflow::models::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// A [B, C, T] tensor as the kernels address it: (outer, C, inner).
struct Geometry {
  int64_t outer, inner;
  bool channels_last;
};

Geometry geometry_of(const torch::Tensor& t) {
  if (t.is_contiguous()) return {t.size(0), t.size(2), false};
  return {t.size(0) * t.size(2), 1, true};
}

bool kernel_layout(const torch::Tensor& t) { return t.is_contiguous() || is_channels_last_1d(t); }

torch::Tensor in_layout(const torch::Tensor& t, bool channels_last) {
  return channels_last ? to_channels_last_1d(t) : t.contiguous();
}

torch::Tensor empty_in_layout(int64_t b, int64_t c, int64_t t, const torch::TensorOptions& options,
                              bool channels_last) {
  if (channels_last) return torch::empty_strided({b, c, t}, {c * t, 1, c}, options);
  return torch::empty({b, c, t}, options);
}

// "No bias" travels as an empty float tensor (cuda_dispatch.h's or_none).
torch::Tensor bias_or_none(const torch::Tensor& bias, const torch::Tensor& like) {
  return or_none(bias, like.options().dtype(torch::kFloat));
}

// A float [C] copy of a bias for the kernels (a parameter is float already: no copy).
torch::Tensor float_bias(const torch::Tensor& bias) { return bias.to(torch::kFloat).contiguous(); }

// The bias's gradient: grad summed over every axis but the channels.
torch::Tensor bias_grad(const torch::Tensor& grad, bool channels_last, torch::ScalarType dtype) {
  if (!channels_last) return grad.sum(at::IntArrayRef{0, 2}).to(dtype);
  return channel_sums_channels_last(grad, dtype);
}

// The buffers of a bias gradient that a backward kernel sums as it writes the gradient
// (kernels/wn_kernels.h): grad_bias float [C] and, for more than one block of rows, the blocks'
// partial rows. Undefined where the kernel does not sum it.
struct BiasSums {
  torch::Tensor partials, grad_bias;
  float* partials_ptr() const { return partials.defined() ? partials.data_ptr<float>() : nullptr; }
  float* grad_bias_ptr() const { return grad_bias.defined() ? grad_bias.data_ptr<float>() : nullptr; }
};

BiasSums bias_sums(int64_t rows, int64_t channels, const torch::TensorOptions& like) {
  const auto f32 = like.dtype(torch::kFloat);
  const int64_t blocks = kernels::bias_sum_blocks(rows);
  return {blocks > 1 ? torch::empty({blocks, channels}, f32) : torch::Tensor(), torch::empty({channels}, f32)};
}

// The bias's gradient in its dtype: the kernel's sums where it summed, else grad's channel sums.
torch::Tensor bias_grad_of(const BiasSums& sums, const torch::Tensor& grad, bool channels_last,
                           torch::ScalarType dtype) {
  return sums.grad_bias.defined() ? sums.grad_bias.to(dtype) : bias_grad(grad, channels_last, dtype);
}

class GatedActivation : public torch::autograd::Function<GatedActivation> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& bias,
                               double dropout_p) {
    const c10::cuda::CUDAGuard guard(x_in.device());
    const torch::Tensor x = kernel_layout(x_in) ? x_in : x_in.contiguous();
    const torch::Tensor b = float_bias(bias);
    const Geometry g = geometry_of(x);
    const int64_t h = x.size(1) / 2;
    const kernels::PhiloxDropout dropout = start_dropout(dropout_p, x.device());
    auto acts = empty_in_layout(x.size(0), h, x.size(2), x.options(), g.channels_last);
    // The dropout mask as bits, where the kernel records it (an empty tensor otherwise).
    torch::Tensor keep_record = torch::empty({0}, x.options().dtype(torch::kUInt8));
    dispatch_kernel_dtype(x.scalar_type(), "WN fused kernels", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      if (dropout.enabled && kernels::gate_records_keep_bits<T>(h * g.inner, g.inner, x.data_ptr(), acts.data_ptr())) {
        keep_record = torch::empty({(x.numel() + 7) / 8}, keep_record.options());
      }
      check_launch(kernels::launch_tanh_sigmoid_gate_forward<T>(
                       data_as<T>(x), data_or_null<float>(b), data_as<T>(acts),
                       data_or_null<uint8_t>(keep_record), g.outer, h * g.inner,
                       g.inner, dropout, at::cuda::getCurrentCUDAStream()),
                   "gated_activation forward");
    });
    ctx->save_for_backward({x, b, keep_record});
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    save_dropout(ctx, dropout);
    return acts;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& b = saved[1];
    const torch::Tensor& keep_record = saved[2];
    const c10::cuda::CUDAGuard guard(x.device());
    const Geometry g = geometry_of(x);
    const int64_t h = x.size(1) / 2;
    const kernels::PhiloxDropout dropout = saved_dropout(ctx);
    const torch::Tensor grad_acts = in_layout(grads[0].to(x.scalar_type()), g.channels_last);
    auto grad_in = empty_in_layout(x.size(0), 2 * h, x.size(2), x.options(), g.channels_last);
    BiasSums sums;
    dispatch_kernel_dtype(x.scalar_type(), "WN fused kernels", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      if (is_given(b) && kernels::gate_backward_sums_bias<T>(g.outer, h * g.inner, g.inner, x.data_ptr(),
                                                             grad_acts.data_ptr(), grad_in.data_ptr())) {
        sums = bias_sums(g.outer, 2 * h, x.options());
      }
      check_launch(kernels::launch_tanh_sigmoid_gate_backward<T>(
                       data_as<T>(x), data_or_null<float>(b), data_as<T>(grad_acts),
                       data_or_null<uint8_t>(keep_record), data_as<T>(grad_in),
                       sums.partials_ptr(), sums.grad_bias_ptr(), g.outer, h * g.inner, g.inner, dropout,
                       at::cuda::getCurrentCUDAStream()),
                   "gated_activation backward");
    });
    torch::Tensor grad_bias;
    if (is_given(b)) {
      grad_bias = bias_grad_of(sums, grad_in, g.channels_last,
                               static_cast<torch::ScalarType>(ctx->saved_data["bias_dtype"].toInt()));
    }
    return {grad_in, grad_bias, torch::Tensor()};
  }
};

class ResidualSkip : public torch::autograd::Function<ResidualSkip> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& skip_sum,
                             const torch::Tensor& res_skip, const torch::Tensor& bias, const torch::Tensor& x_mask,
                             bool low_copy) {
    const c10::cuda::CUDAGuard guard(x.device());
    const Geometry g = geometry_of(x);
    const int64_t h = x.size(1);
    const torch::Tensor mask = x_mask.to(torch::kFloat).contiguous();
    const torch::Tensor b = float_bias(bias);
    auto x_out = empty_in_layout(x.size(0), h, x.size(2), x.options(), g.channels_last);
    auto skip_out = empty_in_layout(x.size(0), h, x.size(2), x.options(), g.channels_last);
    // x_out in res_skip's dtype, when that is a low precision; otherwise an empty placeholder.
    const bool write_low = low_copy && res_skip.scalar_type() != torch::kFloat;
    auto x_low = write_low ? empty_in_layout(x.size(0), h, x.size(2), res_skip.options(), g.channels_last)
                           : torch::empty({0}, res_skip.options());
    if (!write_low) ctx->mark_non_differentiable({x_low});
    dispatch_kernel_dtype(res_skip.scalar_type(), "WN fused kernels", [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      check_launch(kernels::launch_residual_skip_forward<R>(
                       data_as<float>(x), data_or_null<float>(skip_sum), data_as<R>(res_skip), data_or_null<float>(b),
                       data_as<float>(mask), data_as<float>(x_out), data_as<float>(skip_out),
                       write_low ? data_as<R>(x_low) : nullptr, g.outer, h * g.inner, g.inner,
                       at::cuda::getCurrentCUDAStream()),
                   "residual_skip forward");
    });
    ctx->save_for_backward({mask});
    ctx->set_materialize_grads(false);
    ctx->saved_data["channels"] = h;
    ctx->saved_data["res_skip_dtype"] = static_cast<int64_t>(res_skip.scalar_type());
    ctx->saved_data["channels_last"] = g.channels_last;
    ctx->saved_data["bias_dtype"] =
        static_cast<int64_t>(is_given(bias) ? bias.scalar_type() : c10::ScalarType::Undefined);
    return {x_out, skip_out, x_low};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor mask = ctx->get_saved_variables()[0];
    const bool channels_last = ctx->saved_data["channels_last"].toBool();
    const auto res_dtype = static_cast<torch::ScalarType>(ctx->saved_data["res_skip_dtype"].toInt());
    // Gradients are not materialised (set_materialize_grads(false)): under autocast the last
    // update's x_out is used only through its low-precision copy, and a zero gradient for it
    // cost a fill and a layout copy per block. An undefined one reads as zero in the kernel.
    const int64_t h = ctx->saved_data["channels"].toInt();
    const int64_t b = mask.size(0), t = mask.size(2);
    const auto f32 = mask.options().dtype(torch::kFloat);
    const torch::Tensor grad_x_out = grads[0].defined() ? in_layout(grads[0].to(torch::kFloat), channels_last)
                                                        : torch::Tensor();
    const torch::Tensor grad_skip_out = grads[1].defined() ? in_layout(grads[1].to(torch::kFloat), channels_last)
                                                           : empty_in_layout(b, h, t, f32, channels_last).zero_();
    const c10::cuda::CUDAGuard guard(grad_skip_out.device());
    const Geometry g = geometry_of(grad_skip_out);
    auto grad_x = empty_in_layout(b, h, t, f32, channels_last);
    auto grad_res_skip = empty_in_layout(b, 2 * h, t, f32.dtype(res_dtype), channels_last);
    const bool has_low = grads.size() > 2 && is_given(grads[2]);
    const torch::Tensor grad_x_low = has_low ? in_layout(grads[2].to(res_dtype), channels_last) : torch::Tensor();
    const auto bias_dtype = static_cast<torch::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    BiasSums sums;
    dispatch_kernel_dtype(res_dtype, "WN fused kernels", [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      const float* gx_out = grad_x_out.defined() ? data_as<float>(grad_x_out) : nullptr;
      const R* gx_low = has_low ? data_as<R>(grad_x_low) : nullptr;
      if (bias_dtype != c10::ScalarType::Undefined &&
          kernels::residual_skip_backward_sums_bias<R>(g.outer, h * g.inner, g.inner, gx_out,
                                                       data_as<float>(grad_skip_out), gx_low, data_as<float>(grad_x),
                                                       data_as<R>(grad_res_skip))) {
        sums = bias_sums(g.outer, 2 * h, f32);
      }
      check_launch(kernels::launch_residual_skip_backward<R>(gx_out, data_as<float>(grad_skip_out), gx_low,
                                                             data_as<float>(mask), data_as<float>(grad_x),
                                                             data_as<R>(grad_res_skip), sums.partials_ptr(),
                                                             sums.grad_bias_ptr(), g.outer, h * g.inner, g.inner,
                                                             at::cuda::getCurrentCUDAStream()),
                   "residual_skip backward");
    });
    torch::Tensor grad_bias;
    if (bias_dtype != c10::ScalarType::Undefined) {
      grad_bias = bias_grad_of(sums, grad_res_skip, channels_last, bias_dtype);
    }
    // No skip sum given (an empty tensor: the sum starts here) wants no gradient.
    return {grad_x, ctx->needs_input_grad(1) ? grad_skip_out : torch::Tensor(), grad_res_skip, grad_bias,
            torch::Tensor(), torch::Tensor()};
  }
};

// residual_skip's kernels without the skip half (kernels/wn_kernels.h): out = (x + res + bias)
// * mask, x optional. Inputs: x (float, or empty: none), res, bias (or empty), x_mask.
class MaskedSum : public torch::autograd::Function<MaskedSum> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& res,
                             const torch::Tensor& bias, const torch::Tensor& x_mask, bool low_copy, bool low_only) {
    const c10::cuda::CUDAGuard guard(res.device());
    const Geometry g = geometry_of(res);
    const int64_t h = res.size(1);
    const bool has_x = is_given(x);
    const torch::Tensor mask = x_mask.to(torch::kFloat).contiguous();
    const torch::Tensor b = float_bias(bias);
    const auto f32 = res.options().dtype(torch::kFloat);
    const bool write_low = low_copy && res.scalar_type() != torch::kFloat;
    // Only the low copy where that is all the caller reads (the float sum is then not written).
    const bool write_out = !(write_low && low_only);
    auto out = write_out ? empty_in_layout(res.size(0), h, res.size(2), f32, g.channels_last) : torch::empty({0}, f32);
    auto out_low = write_low ? empty_in_layout(res.size(0), h, res.size(2), res.options(), g.channels_last)
                             : torch::empty({0}, res.options());
    if (!write_out) ctx->mark_non_differentiable({out});
    if (!write_low) ctx->mark_non_differentiable({out_low});
    dispatch_kernel_dtype(res.scalar_type(), "WN fused kernels", [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      check_launch(kernels::launch_residual_skip_forward<R>(
                       has_x ? data_as<float>(x) : nullptr, nullptr, data_as<R>(res), data_or_null<float>(b),
                       data_as<float>(mask), write_out ? data_as<float>(out) : nullptr, nullptr,
                       write_low ? data_as<R>(out_low) : nullptr,
                       g.outer, h * g.inner, g.inner, at::cuda::getCurrentCUDAStream()),
                   "masked_sum forward");
    });
    ctx->save_for_backward({mask});
    ctx->set_materialize_grads(false);
    ctx->saved_data["channels"] = h;
    ctx->saved_data["has_x"] = has_x;
    ctx->saved_data["res_dtype"] = static_cast<int64_t>(res.scalar_type());
    ctx->saved_data["channels_last"] = g.channels_last;
    ctx->saved_data["bias_dtype"] =
        static_cast<int64_t>(is_given(bias) ? bias.scalar_type() : c10::ScalarType::Undefined);
    return {out, out_low};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor mask = ctx->get_saved_variables()[0];
    const bool channels_last = ctx->saved_data["channels_last"].toBool();
    const bool has_x = ctx->saved_data["has_x"].toBool();
    const auto res_dtype = static_cast<torch::ScalarType>(ctx->saved_data["res_dtype"].toInt());
    const auto bias_dtype = static_cast<torch::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    const int64_t h = ctx->saved_data["channels"].toInt();
    const int64_t b = mask.size(0), t = mask.size(2);
    const auto f32 = mask.options().dtype(torch::kFloat);
    const bool has_out = is_given(grads[0]);
    const bool has_low = grads.size() > 1 && is_given(grads[1]);
    const torch::Tensor grad_out = has_out ? in_layout(grads[0].to(torch::kFloat), channels_last) : torch::Tensor();
    const torch::Tensor grad_low = has_low ? in_layout(grads[1].to(res_dtype), channels_last) : torch::Tensor();
    const c10::cuda::CUDAGuard guard(mask.device());
    auto grad_x = has_x ? empty_in_layout(b, h, t, f32, channels_last) : torch::Tensor();
    auto grad_res = empty_in_layout(b, h, t, f32.dtype(res_dtype), channels_last);
    const Geometry g = geometry_of(grad_res);
    BiasSums sums;
    dispatch_kernel_dtype(res_dtype, "WN fused kernels", [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      const float* g_out = has_out ? data_as<float>(grad_out) : nullptr;
      const R* g_low = has_low ? data_as<R>(grad_low) : nullptr;
      float* g_x = has_x ? data_as<float>(grad_x) : nullptr;
      // The summing kernel keeps residual_skip's 2H columns of sums, the second half zero here.
      if (bias_dtype != c10::ScalarType::Undefined &&
          kernels::residual_skip_backward_sums_bias<R>(g.outer, h * g.inner, g.inner, g_out, nullptr, g_low, g_x,
                                                       data_as<R>(grad_res))) {
        sums = bias_sums(g.outer, 2 * h, f32);
      }
      check_launch(kernels::launch_residual_skip_backward<R>(g_out, nullptr, g_low, data_as<float>(mask), g_x,
                                                             data_as<R>(grad_res), sums.partials_ptr(),
                                                             sums.grad_bias_ptr(), g.outer, h * g.inner, g.inner,
                                                             at::cuda::getCurrentCUDAStream()),
                   "masked_sum backward");
    });
    if (sums.grad_bias.defined()) sums.grad_bias = sums.grad_bias.slice(0, 0, h);
    torch::Tensor grad_bias;
    if (bias_dtype != c10::ScalarType::Undefined) grad_bias = bias_grad_of(sums, grad_res, channels_last, bias_dtype);
    return {grad_x, grad_res, grad_bias, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// rows [N, C_in] x weight_t [C_in, C_out] + bias [C_out]: addmm forward (the bias in cuBLAS's
// epilogue), and a backward whose bias gradient is one matrix-vector product; addmm's own
// backward sums the gradient's columns with the generic reduction, ~30 us a call at the
// decoder's shapes. Under autocast the three inputs are cast as autocast would cast them,
// and each gradient goes back in its input's dtype.
class RowsAffine : public torch::autograd::Function<RowsAffine> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& rows, const torch::Tensor& weight_t,
                               const torch::Tensor& bias) {
    const bool cast = at::autocast::is_autocast_enabled(at::kCUDA);
    const auto dtype = cast ? at::autocast::get_autocast_dtype(at::kCUDA) : rows.scalar_type();
    const auto r = rows.to(dtype), w = weight_t.to(dtype);
    ctx->save_for_backward({r, w});
    ctx->saved_data["rows_dtype"] = static_cast<int64_t>(rows.scalar_type());
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight_t.scalar_type());
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return torch::addmm(bias.to(dtype), r, w);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& r = saved[0];
    const torch::Tensor& w = saved[1];
    const auto dtype_of = [&](const char* key) { return static_cast<torch::ScalarType>(ctx->saved_data[key].toInt()); };
    const torch::Tensor g = grads[0].to(r.scalar_type());
    torch::Tensor grad_rows, grad_weight;
    if (ctx->needs_input_grad(0)) grad_rows = g.mm(w.t()).to(dtype_of("rows_dtype"));
    if (ctx->needs_input_grad(1)) grad_weight = r.t().mm(g).to(dtype_of("weight_dtype"));
    return {grad_rows, grad_weight, column_sums(g, dtype_of("bias_dtype"))};
  }
};

}  // namespace

torch::Tensor rows_affine(const torch::Tensor& rows, const torch::Tensor& weight_t, const torch::Tensor& bias) {
  return RowsAffine::apply(rows, weight_t, bias);
}

bool fused_gate_applies(const torch::Tensor& x_in, const torch::Tensor& bias, double dropout_p) {
  if (!x_in.is_cuda() || x_in.dim() != 3 || x_in.size(1) % 2 != 0 || !kernel_dtype(x_in.scalar_type())) return false;
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != x_in.size(1) || bias.device() != x_in.device())) {
    return false;
  }
  return dropout_p >= 0 && dropout_p < 1;
}

torch::Tensor gated_activation(const torch::Tensor& x_in, const torch::Tensor& bias, double dropout_p) {
  return GatedActivation::apply(x_in, bias_or_none(bias, x_in), dropout_p);
}

bool fused_residual_applies(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                            const torch::Tensor& bias, const torch::Tensor& x_mask) {
  if (!x.is_cuda() || x.dim() != 3 || x.scalar_type() != torch::kFloat) return false;
  if (skip_sum.defined() &&
      (skip_sum.sizes() != x.sizes() || skip_sum.scalar_type() != torch::kFloat || skip_sum.device() != x.device())) {
    return false;
  }
  if (res_skip.dim() != 3 || res_skip.device() != x.device() || !kernel_dtype(res_skip.scalar_type()) ||
      res_skip.size(0) != x.size(0) || res_skip.size(1) != 2 * x.size(1) || res_skip.size(2) != x.size(2)) {
    return false;
  }
  if (x_mask.dim() != 3 || x_mask.size(0) != x.size(0) || x_mask.size(1) != 1 || x_mask.size(2) != x.size(2) ||
      x_mask.device() != x.device()) {
    return false;
  }
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != res_skip.size(1) || bias.device() != x.device())) {
    return false;
  }
  const bool no_skip_sum = !skip_sum.defined();
  const bool contiguous = x.is_contiguous() && (no_skip_sum || skip_sum.is_contiguous()) && res_skip.is_contiguous();
  const bool channels_last =
      is_channels_last_1d(x) && (no_skip_sum || is_channels_last_1d(skip_sum)) && is_channels_last_1d(res_skip);
  return contiguous || channels_last;
}

ResidualSkipOutput residual_skip(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                                 const torch::Tensor& bias, const torch::Tensor& x_mask, bool with_low) {
  auto out = ResidualSkip::apply(x, or_none(skip_sum, x.options()), res_skip, bias_or_none(bias, x), x_mask, with_low);
  if (!with_low) return {out[0], out[1], torch::Tensor()};
  if (out[2].numel() == 0) out[2] = out[0].to(res_skip.scalar_type());  // float res_skip: no low copy
  return {out[0], out[1], out[2]};
}

bool fused_masked_sum_applies(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                              const torch::Tensor& x_mask) {
  if (!res.is_cuda() || res.dim() != 3 || !kernel_dtype(res.scalar_type()) || !kernel_layout(res)) return false;
  if (x.defined() && (x.sizes() != res.sizes() || x.scalar_type() != torch::kFloat || x.device() != res.device() ||
                      !(res.is_contiguous() ? x.is_contiguous() : is_channels_last_1d(x)))) {
    return false;
  }
  if (x_mask.dim() != 3 || x_mask.size(0) != res.size(0) || x_mask.size(1) != 1 || x_mask.size(2) != res.size(2) ||
      x_mask.device() != res.device()) {
    return false;
  }
  return !bias.defined() || (bias.dim() == 1 && bias.size(0) == res.size(1) && bias.device() == res.device());
}

MaskedSumOutput masked_sum(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                           const torch::Tensor& x_mask, bool with_low, bool low_only) {
  auto out = MaskedSum::apply(or_none(x, res.options().dtype(torch::kFloat)), res, bias_or_none(bias, res), x_mask,
                              with_low, low_only);
  if (!with_low) return {out[0], torch::Tensor()};
  if (out[1].numel() == 0) out[1] = out[0].to(res.scalar_type());  // float res: no low copy
  if (low_only) return {torch::Tensor(), out[1]};
  return {out[0], out[1]};
}

}  // namespace monoflow::models::cuda
