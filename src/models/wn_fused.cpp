#include "models/wn_fused.h"

#include <ATen/autocast_mode.h>

#include <vector>

#include "models/dropout.h"
#include "models/gate_cpu.h"
#include "models/residual_cpu.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/weight_grads_aside_cuda.h"
#include "models/wn_fused_cuda.h"
#endif

namespace monoflow::models {

bool is_channels_last_1d(const torch::Tensor& t) {
  if (t.dim() != 3) return false;
  const int64_t c = t.size(1), n = t.size(2);
  return t.stride(1) == 1 && (n == 1 || t.stride(2) == c) && (t.size(0) == 1 || t.stride(0) == c * n);
}

torch::Tensor to_channels_last_1d(const torch::Tensor& t) {
  if (is_channels_last_1d(t)) return t;
  return t.transpose(1, 2).contiguous().transpose(1, 2);
}

torch::Tensor to_time_rows(const torch::Tensor& x) {
  if (!x.is_cuda() || x.dim() != 3) return x;
  return x.unsqueeze(2).contiguous(torch::MemoryFormat::ChannelsLast);
}

torch::Tensor conv_over_time(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t padding, int64_t dilation, bool weight_grad_aside) {
  if (x.dim() == 4 && weight.size(2) == 1 && x.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    // A 1x1 convolution of ChannelsLast rows is a matrix product [B * T, C_in] x [C_in, C_out]:
    // cuBLAS's sm90 kernels instead of cuDNN's, and no layout change either way.
    const int64_t b = x.size(0), c_in = x.size(1), t = x.size(3), c_out = weight.size(0);
    const auto rows = x.permute({0, 2, 3, 1}).reshape({b * t, c_in});
    const auto w = weight.view({c_out, c_in}).t();
    torch::Tensor y;
    if (!bias.defined()) {
      y = torch::mm(rows, w);
    } else {
#ifdef MONOFLOW_HAS_CUDA
      y = x.is_cuda() ? cuda::rows_affine(rows, w, bias) : torch::addmm(bias, rows, w);
#else
      y = torch::addmm(bias, rows, w);
#endif
    }
    return y.view({b, 1, t, c_out}).permute({0, 3, 1, 2});
  }
  if (x.dim() == 4) {
    const std::vector<int64_t> stride{1, 1}, padding_2d{0, padding}, dilation_2d{1, dilation};
    // The weight in the rows' layout (ChannelsLast) and, under autocast, in the convolution's
    // dtype, by one copy: cuDNN would cast it and then transpose it, a kernel each way.
    const bool autocast = x.is_cuda() && at::autocast::is_autocast_enabled(at::kCUDA);
    const auto dtype = autocast ? at::autocast::get_autocast_dtype(at::kCUDA) : weight.scalar_type();
    const auto w = weight.unsqueeze(2).to(dtype, /*non_blocking=*/false, /*copy=*/false,
                                          torch::MemoryFormat::ChannelsLast);
#ifdef MONOFLOW_HAS_CUDA
    // Only where w is a view of the joined weight: a copy's backward would read the gradient
    // before its join.
    if (weight_grad_aside && x.is_cuda() && !bias.defined() && torch::GradMode::is_enabled() &&
        w.data_ptr() == weight.data_ptr()) {
      return cuda::conv_weight_grad_aside(x.to(dtype), w, padding, dilation);
    }
#endif
    return torch::conv2d(x, w, bias, stride, padding_2d, dilation_2d);
  }
  if (weight.size(2) == 1 && x.device().is_cpu() && !torch::GradMode::is_enabled()) {
    // CPU inference: a 1x1 convolution as one matrix product (MKL); the start and end layers
    // went from oneDNN's convolution (~15 ms of a 1,800-frame call on 2 cores) to ~5 ms.
    auto y = torch::matmul(weight.squeeze(2), x);
    if (bias.defined()) y.add_(bias.view({1, -1, 1}));
    return y;
  }
  return torch::conv1d(x, weight, bias, /*stride=*/1, padding, dilation);
}

namespace {

// [B, C, 1, T] -> [B, C, T] (a view: ChannelsLast becomes channels-last 3-D).
bool is_time_rows(const torch::Tensor& t) { return t.dim() == 4 && t.size(2) == 1; }

// bias [C] broadcast over x [B, C, T] or [B, C, 1, T].
torch::Tensor over_channels(const torch::Tensor& bias, const torch::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = -1;
  return bias.view(shape);
}

}  // namespace

bool wn_fused_applies(const torch::Tensor& x) {
#ifdef MONOFLOW_HAS_CUDA
  return x.is_cuda();
#else
  (void)x;
  return false;
#endif
}

torch::Tensor gated_activation_reference(const torch::Tensor& x_in, const torch::Tensor& bias, double dropout_p,
                                         bool training) {
  auto x = bias.defined() ? x_in + over_channels(bias, x_in) : x_in;
  x = models::dropout(x, dropout_p, training);
  // chunk, not slice: the backward of a split is one concatenation, where each slice's would
  // fill a zero tensor, copy into it, and add the two (three kernels per half).
  const auto gate = x.chunk(2, 1);
  return torch::tanh(gate[0]) * torch::sigmoid(gate[1]);
}

torch::Tensor gated_activation(const torch::Tensor& x_in, const torch::Tensor& bias, double dropout_p, bool training) {
  if (is_time_rows(x_in)) return gated_activation(x_in.squeeze(2), bias, dropout_p, training).unsqueeze(2);
#ifdef MONOFLOW_HAS_CUDA
  const double p = training ? dropout_p : 0.0;
  if (cuda::fused_gate_applies(x_in, bias, p)) return cuda::gated_activation(x_in, bias, p);
#endif
  // The CPU's float32 training and inference take the gate alone: their bias is in the
  // convolution and their dropout before the speaker conditioning (WNImpl::forward).
  if (!bias.defined() && (!training || dropout_p == 0.0) && gate_cpu_applies(x_in)) return gated_activation_cpu(x_in);
  return gated_activation_reference(x_in, bias, dropout_p, training);
}

std::pair<torch::Tensor, torch::Tensor> residual_skip_reference(const torch::Tensor& x, const torch::Tensor& skip_sum,
                                                                const torch::Tensor& res_skip_in,
                                                                const torch::Tensor& bias,
                                                                const torch::Tensor& x_mask) {
  const auto res_skip = bias.defined() ? res_skip_in + over_channels(bias, res_skip_in) : res_skip_in;
  const auto res_and_skip = res_skip.chunk(2, 1);
  const auto skip = skip_sum.defined() ? skip_sum + res_and_skip[1] : res_and_skip[1].to(x.scalar_type(), false, true);
  return {(x + res_and_skip[0]) * x_mask, skip};
}

ResidualSkipOutput residual_skip(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                                 const torch::Tensor& bias, const torch::Tensor& x_mask, bool with_low) {
  if (is_time_rows(x) && (!skip_sum.defined() || is_time_rows(skip_sum)) && is_time_rows(res_skip) &&
      is_time_rows(x_mask)) {
    auto out = residual_skip(x.squeeze(2), skip_sum.defined() ? skip_sum.squeeze(2) : skip_sum, res_skip.squeeze(2),
                             bias, x_mask.squeeze(2), with_low);
    return {out.x.unsqueeze(2), out.skip.unsqueeze(2), with_low ? out.x_low.unsqueeze(2) : torch::Tensor()};
  }
#ifdef MONOFLOW_HAS_CUDA
  if (cuda::fused_residual_applies(x, skip_sum, res_skip, bias, x_mask)) {
    return cuda::residual_skip(x, skip_sum, res_skip, bias, x_mask, with_low);
  }
#endif
  if (!bias.defined() && skip_sum.defined() && cpu::residual_skip_cpu_applies(x, skip_sum, res_skip, x_mask)) {
    auto out = cpu::residual_skip_cpu(x, skip_sum, res_skip, x_mask);
    return {out.x, out.skip, with_low ? out.x_low : torch::Tensor()};
  }
  auto [x_out, skip_out] = residual_skip_reference(x, skip_sum, res_skip, bias, x_mask);
  return {x_out, skip_out, with_low ? x_out.to(res_skip.scalar_type()) : torch::Tensor()};
}

torch::Tensor masked_sum_reference(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                                   const torch::Tensor& x_mask) {
  // 16-bit res joins the float sum; float32 and float64 stay as they are.
  const bool low = res.scalar_type() == torch::kHalf || res.scalar_type() == torch::kBFloat16;
  auto sum = low ? res.to(torch::kFloat) : res;
  if (bias.defined()) sum = sum + over_channels(bias, res);
  if (x.defined()) sum = x + sum;
  return sum * x_mask;
}

MaskedSumOutput masked_sum(const torch::Tensor& x, const torch::Tensor& res, const torch::Tensor& bias,
                           const torch::Tensor& x_mask, bool with_low, bool low_only) {
  TORCH_CHECK(with_low || !low_only, "masked_sum: low_only needs with_low");
  if (is_time_rows(res) && (!x.defined() || is_time_rows(x)) && is_time_rows(x_mask)) {
    auto out =
        masked_sum(x.defined() ? x.squeeze(2) : x, res.squeeze(2), bias, x_mask.squeeze(2), with_low, low_only);
    return {out.out.defined() ? out.out.unsqueeze(2) : out.out, with_low ? out.out_low.unsqueeze(2) : torch::Tensor()};
  }
#ifdef MONOFLOW_HAS_CUDA
  if (cuda::fused_masked_sum_applies(x, res, bias, x_mask)) {
    return cuda::masked_sum(x, res, bias, x_mask, with_low, low_only);
  }
#endif
  const auto out = !bias.defined() && cpu::masked_sum_cpu_applies(x, res, x_mask)
                       ? cpu::masked_sum_cpu(x, res, x_mask)
                       : masked_sum_reference(x, res, bias, x_mask);
  if (!with_low) return {out, torch::Tensor()};
  return {low_only ? torch::Tensor() : out, out.to(res.scalar_type())};  // float res: out itself
}

}  // namespace monoflow::models
