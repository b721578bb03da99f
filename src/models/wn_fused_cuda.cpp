#include "models/wn_fused_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "models/kernels/wn_kernels.h"
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

bool kernel_dtype(torch::ScalarType s) {
  return s == torch::kFloat || s == torch::kHalf || s == torch::kBFloat16;
}

void check(cudaError_t error, const char* what) {
  TORCH_CHECK(error == cudaSuccess, what, ": ", cudaGetErrorString(error));
}

// Calls f(T*) with the kernel element type of `s`.
template <typename F>
void dispatch(torch::ScalarType s, F&& f) {
  switch (s) {
    case torch::kFloat: f(static_cast<float*>(nullptr)); break;
    case torch::kHalf: f(static_cast<__half*>(nullptr)); break;
    case torch::kBFloat16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
    default: TORCH_CHECK(false, "WN fused kernels: unsupported dtype ", s);
  }
}

template <typename T>
T* ptr(const torch::Tensor& t) { return reinterpret_cast<T*>(t.data_ptr()); }

class TanhSigmoidGate : public torch::autograd::Function<TanhSigmoidGate> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in) {
    const c10::cuda::CUDAGuard guard(x_in.device());
    const torch::Tensor x = kernel_layout(x_in) ? x_in : x_in.contiguous();
    const Geometry g = geometry_of(x);
    const int64_t h = x.size(1) / 2;
    auto acts = empty_in_layout(x.size(0), h, x.size(2), x.options(), g.channels_last);
    dispatch(x.scalar_type(), [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      check(kernels::launch_tanh_sigmoid_gate_forward<T>(ptr<T>(x), ptr<T>(acts), g.outer, h * g.inner,
                                                         at::cuda::getCurrentCUDAStream()),
            "tanh_sigmoid_gate forward");
    });
    ctx->save_for_backward({x});
    return acts;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const c10::cuda::CUDAGuard guard(x.device());
    const Geometry g = geometry_of(x);
    const int64_t h = x.size(1) / 2;
    const torch::Tensor grad_acts = in_layout(grads[0].to(x.scalar_type()), g.channels_last);
    auto grad_in = empty_in_layout(x.size(0), 2 * h, x.size(2), x.options(), g.channels_last);
    dispatch(x.scalar_type(), [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      check(kernels::launch_tanh_sigmoid_gate_backward<T>(ptr<T>(x), ptr<T>(grad_acts), ptr<T>(grad_in), g.outer,
                                                          h * g.inner, at::cuda::getCurrentCUDAStream()),
            "tanh_sigmoid_gate backward");
    });
    return {grad_in};
  }
};

class ResidualSkip : public torch::autograd::Function<ResidualSkip> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& skip_sum,
                             const torch::Tensor& res_skip, const torch::Tensor& x_mask) {
    const c10::cuda::CUDAGuard guard(x.device());
    const Geometry g = geometry_of(x);
    const int64_t h = x.size(1);
    const torch::Tensor mask = x_mask.to(torch::kFloat).contiguous();
    auto x_out = empty_in_layout(x.size(0), h, x.size(2), x.options(), g.channels_last);
    auto skip_out = empty_in_layout(x.size(0), h, x.size(2), x.options(), g.channels_last);
    dispatch(res_skip.scalar_type(), [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      check(kernels::launch_residual_skip_forward<R>(ptr<float>(x), ptr<float>(skip_sum), ptr<R>(res_skip),
                                                     ptr<float>(mask), ptr<float>(x_out), ptr<float>(skip_out),
                                                     g.outer, h * g.inner, g.inner,
                                                     at::cuda::getCurrentCUDAStream()),
            "residual_skip forward");
    });
    ctx->save_for_backward({mask});
    ctx->saved_data["res_skip_dtype"] = static_cast<int64_t>(res_skip.scalar_type());
    ctx->saved_data["channels_last"] = g.channels_last;
    return {x_out, skip_out};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor mask = ctx->get_saved_variables()[0];
    const bool channels_last = ctx->saved_data["channels_last"].toBool();
    const auto res_dtype = static_cast<torch::ScalarType>(ctx->saved_data["res_skip_dtype"].toInt());
    const torch::Tensor grad_x_out = in_layout(grads[0].to(torch::kFloat), channels_last);
    const torch::Tensor grad_skip_out = in_layout(grads[1].to(torch::kFloat), channels_last);
    const c10::cuda::CUDAGuard guard(grad_x_out.device());
    const Geometry g = geometry_of(grad_x_out);
    const int64_t b = grad_x_out.size(0), h = grad_x_out.size(1), t = grad_x_out.size(2);
    auto grad_x = empty_in_layout(b, h, t, grad_x_out.options(), channels_last);
    auto grad_res_skip = empty_in_layout(b, 2 * h, t, grad_x_out.options().dtype(res_dtype), channels_last);
    dispatch(res_dtype, [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      check(kernels::launch_residual_skip_backward<R>(ptr<float>(grad_x_out), ptr<float>(grad_skip_out),
                                                      ptr<float>(mask), ptr<float>(grad_x), ptr<R>(grad_res_skip),
                                                      g.outer, h * g.inner, g.inner,
                                                      at::cuda::getCurrentCUDAStream()),
            "residual_skip backward");
    });
    return {grad_x, grad_skip_out, grad_res_skip, torch::Tensor()};
  }
};

}  // namespace

bool fused_gate_applies(const torch::Tensor& x_in) {
  return x_in.is_cuda() && x_in.dim() == 3 && x_in.size(1) % 2 == 0 && kernel_dtype(x_in.scalar_type());
}

torch::Tensor tanh_sigmoid_gate(const torch::Tensor& x_in) { return TanhSigmoidGate::apply(x_in); }

bool fused_residual_applies(const torch::Tensor& x, const torch::Tensor& skip_sum, const torch::Tensor& res_skip,
                            const torch::Tensor& x_mask) {
  if (!x.is_cuda() || x.dim() != 3 || x.scalar_type() != torch::kFloat) return false;
  if (skip_sum.sizes() != x.sizes() || skip_sum.scalar_type() != torch::kFloat || skip_sum.device() != x.device()) {
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
  const bool contiguous = x.is_contiguous() && skip_sum.is_contiguous() && res_skip.is_contiguous();
  const bool channels_last = is_channels_last_1d(x) && is_channels_last_1d(skip_sum) && is_channels_last_1d(res_skip);
  return contiguous || channels_last;
}

std::pair<torch::Tensor, torch::Tensor> residual_skip(const torch::Tensor& x, const torch::Tensor& skip_sum,
                                                      const torch::Tensor& res_skip, const torch::Tensor& x_mask) {
  auto out = ResidualSkip::apply(x, skip_sum, res_skip, x_mask);
  return {out[0], out[1]};
}

}  // namespace monoflow::models::cuda
