#include "models/flow_fused_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "models/cuda_dispatch.h"
#include "models/kernels/flow_kernels.h"
#include "models/wn_fused.h"  // is_channels_last_1d

namespace monoflow::models::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// How the flow kernels read masks and incoming gradients: float, contiguous.
torch::Tensor float_contiguous(const torch::Tensor& t) { return t.to(torch::kFloat).contiguous(); }

// x_mask [B, 1, T] for x [B, C, T], on x's device (what every flow kernel takes).
bool mask_fits(const torch::Tensor& x_mask, const torch::Tensor& x) {
  return x_mask.dim() == 3 && x_mask.size(0) == x.size(0) && x_mask.size(1) == 1 && x_mask.size(2) == x.size(2) &&
         x_mask.device() == x.device();
}

// Batch chunks per channel for the backward's partial sums: enough blocks to fill the GPU.
int chunks_for(int64_t batch, int64_t channels) {
  return static_cast<int>(std::clamp<int64_t>(1024 / std::max<int64_t>(channels, 1), 1, std::max<int64_t>(batch, 1)));
}

class ActNormAffine : public torch::autograd::Function<ActNormAffine> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& logs,
                               const torch::Tensor& bias, const torch::Tensor& x_mask) {
    const c10::cuda::CUDAGuard guard(x_in.device());
    const auto x = x_in.contiguous();
    const auto mask = float_contiguous(x_mask);
    const auto l = logs.contiguous(), b = bias.contiguous();
    auto y = torch::empty_like(x);
    check_launch(kernels::launch_actnorm_forward(x.data_ptr<float>(), l.data_ptr<float>(), b.data_ptr<float>(),
                                          mask.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1),
                                          x.size(2), at::cuda::getCurrentCUDAStream()),
          "actnorm forward");
    ctx->save_for_backward({x, l, mask});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &logs = saved[1], &mask = saved[2];
    const c10::cuda::CUDAGuard guard(x.device());
    const auto grad_y = float_contiguous(grads[0]);
    const int64_t batch = x.size(0), channels = x.size(1), time = x.size(2);
    const int chunks = chunks_for(batch, channels);
    auto grad_x = torch::empty_like(x);
    auto partial_logs = torch::empty({channels, chunks}, x.options());
    auto partial_bias = torch::empty({channels, chunks}, x.options());
    check_launch(kernels::launch_actnorm_backward(x.data_ptr<float>(), logs.data_ptr<float>(), mask.data_ptr<float>(),
                                           grad_y.data_ptr<float>(), grad_x.data_ptr<float>(),
                                           partial_logs.data_ptr<float>(), partial_bias.data_ptr<float>(), batch,
                                           channels, time, chunks, at::cuda::getCurrentCUDAStream()),
          "actnorm backward");
    return {grad_x, partial_logs.sum(1).view({1, channels, 1}), partial_bias.sum(1).view({1, channels, 1}),
            torch::Tensor()};
  }
};

class InvConvMix : public torch::autograd::Function<InvConvMix> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& weight,
                               const torch::Tensor& x_mask) {
    const c10::cuda::CUDAGuard guard(x_in.device());
    const auto x = x_in.contiguous();
    const auto w = weight.contiguous();
    const auto mask = float_contiguous(x_mask);
    auto z = torch::empty_like(x);
    check_launch(kernels::launch_invconv4_forward(x.data_ptr<float>(), w.data_ptr<float>(), mask.data_ptr<float>(),
                                           z.data_ptr<float>(), x.size(0), x.size(1), x.size(2),
                                           at::cuda::getCurrentCUDAStream()),
          "invconv forward");
    ctx->save_for_backward({x, w, mask});
    return z;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &mask = saved[2];
    const c10::cuda::CUDAGuard guard(x.device());
    const auto grad_z = float_contiguous(grads[0]);
    const int64_t batch = x.size(0), channels = x.size(1), time = x.size(2);
    int blocks = 0;
    kernels::launch_invconv4_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, batch, channels, time,
                                      &blocks, nullptr);
    auto grad_x = torch::empty_like(x);
    auto partial_w = torch::empty({blocks, 16}, x.options());
    check_launch(kernels::launch_invconv4_backward(x.data_ptr<float>(), w.data_ptr<float>(), mask.data_ptr<float>(),
                                            grad_z.data_ptr<float>(), grad_x.data_ptr<float>(),
                                            partial_w.data_ptr<float>(), batch, channels, time, nullptr,
                                            at::cuda::getCurrentCUDAStream()),
          "invconv backward");
    return {grad_x, column_sums(partial_w, torch::kFloat).view({4, 4}), torch::Tensor()};
  }
};

class CouplingAffine : public torch::autograd::Function<CouplingAffine> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& out,
                             const torch::Tensor& bias, const torch::Tensor& x_mask) {
    const c10::cuda::CUDAGuard guard(x.device());
    const auto mask = float_contiguous(x_mask);
    const auto b = bias.contiguous();
    const int64_t batch = x.size(0), channels = x.size(1), time = x.size(2);
    auto z = torch::empty_like(x);
    auto partial = torch::empty({batch, kernels::coupling_tiles(channels / 2, time)}, x.options());
    dispatch_kernel_dtype(out.scalar_type(), "coupling kernels", [&](auto* tag) {
      using O = std::remove_pointer_t<decltype(tag)>;
      check_launch(kernels::launch_coupling_forward<O>(x.data_ptr<float>(), data_as<O>(out), b.data_ptr<float>(),
                                                mask.data_ptr<float>(), z.data_ptr<float>(),
                                                partial.data_ptr<float>(), batch, channels, time,
                                                at::cuda::getCurrentCUDAStream()),
            "coupling forward");
    });
    ctx->save_for_backward({z, out, b, mask});  // z, not x: see launch_coupling_backward
    return {z, partial.sum(1)};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &z = saved[0], &out = saved[1], &b = saved[2], &mask = saved[3];
    const c10::cuda::CUDAGuard guard(z.device());
    const int64_t batch = z.size(0), channels = z.size(1), time = z.size(2);
    const auto grad_z = float_contiguous(grads[0]);
    const auto grad_logdet = float_contiguous(grads[1]);
    auto grad_x = torch::empty_like(z);
    auto grad_out = torch::empty_strided({batch, channels, time}, {channels * time, 1, channels}, out.options());
    dispatch_kernel_dtype(out.scalar_type(), "coupling kernels", [&](auto* tag) {
      using O = std::remove_pointer_t<decltype(tag)>;
      check_launch(kernels::launch_coupling_backward<O>(z.data_ptr<float>(), data_as<O>(out), b.data_ptr<float>(),
                                                 mask.data_ptr<float>(), grad_z.data_ptr<float>(),
                                                 grad_logdet.data_ptr<float>(), grad_x.data_ptr<float>(),
                                                 data_as<O>(grad_out), batch, channels, time,
                                                 at::cuda::getCurrentCUDAStream()),
            "coupling backward");
    });
    return {grad_x, grad_out, channel_sums_channels_last(grad_out, b.scalar_type()), torch::Tensor()};
  }
};

class CouplingInput : public torch::autograd::Function<CouplingInput> {
 public:
  // x: float32 contiguous [B, C, T] (fused_coupling_input_applies).
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, int64_t rows_dtype) {
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t b = x.size(0), channels = x.size(1), t = x.size(2), half = channels / 2;
    ctx->saved_data["half"] = half;
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined: no zero fill
    // The layout change and the cast to the convolutions' dtype in one kernel.
    const auto dtype = static_cast<torch::ScalarType>(rows_dtype);
    auto rows =
        torch::empty({b, half, 1, t}, x.options().dtype(dtype).memory_format(torch::MemoryFormat::ChannelsLast));
    dispatch_kernel_dtype(dtype, "coupling input", [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      check_launch(kernels::launch_coupling_rows_forward<R>(x.data_ptr<float>(), data_as<R>(rows), b, channels, t,
                                                            at::cuda::getCurrentCUDAStream()),
                   "coupling input forward");
    });
    return {rows, x};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const int64_t half = ctx->saved_data["half"].toInt();
    const auto &grad_rows_in = grads[0], &grad_x = grads[1];
    if (!grad_rows_in.defined()) return {grad_x, torch::Tensor()};
    if (!grad_x.defined()) {
      auto g = torch::zeros({grad_rows_in.size(0), 2 * half, grad_rows_in.size(3)},
                            grad_rows_in.options().dtype(torch::kFloat).memory_format(torch::MemoryFormat::Contiguous));
      g.narrow(1, 0, half).copy_(grad_rows_in.squeeze(2));
      return {g, torch::Tensor()};
    }
    // grad_x is CouplingAffine's fresh gradient (coupling_input's contract), so adding into it
    // in place changes no tensor that anything else holds.
    if (grad_x.scalar_type() != torch::kFloat || !grad_x.is_contiguous()) {
      grad_x.narrow(1, 0, half).add_(grad_rows_in.squeeze(2));  // not the transform's own: ATen's add
      return {grad_x, torch::Tensor()};
    }
    const c10::cuda::CUDAGuard guard(grad_x.device());
    const auto grad_rows = grad_rows_in.contiguous(torch::MemoryFormat::ChannelsLast);
    dispatch_kernel_dtype(grad_rows.scalar_type(), "coupling input", [&](auto* tag) {
      using R = std::remove_pointer_t<decltype(tag)>;
      check_launch(kernels::launch_coupling_rows_backward<R>(data_as<R>(grad_rows), grad_x.data_ptr<float>(),
                                                             grad_x.size(0), grad_x.size(1), grad_x.size(2),
                                                             at::cuda::getCurrentCUDAStream()),
                   "coupling input backward");
    });
    return {grad_x, torch::Tensor()};
  }
};

}  // namespace

bool fused_coupling_input_applies(const torch::Tensor& x, const torch::Tensor& x_mask) {
  return x.is_cuda() && x.dim() == 3 && x.scalar_type() == torch::kFloat && x.is_contiguous() && x.size(1) % 2 == 0 &&
         mask_fits(x_mask, x);
}

std::pair<torch::Tensor, torch::Tensor> coupling_input(const torch::Tensor& x, torch::ScalarType rows_dtype) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 3 && x.size(1) % 2 == 0 && x.scalar_type() == torch::kFloat &&
                  x.is_contiguous(),
              "coupling_input: expected a float32 contiguous CUDA [B, C, T] with C even, got ", x.sizes(), " ",
              x.scalar_type(), x.is_contiguous() ? " contiguous" : " not contiguous", " on ", x.device());
  TORCH_CHECK(kernel_dtype(rows_dtype), "coupling_input: rows in float, half or bfloat16, not ", rows_dtype);
  auto r = CouplingInput::apply(x, static_cast<int64_t>(rows_dtype));
  return {r[0], r[1]};
}

bool fused_coupling_applies(const torch::Tensor& x, const torch::Tensor& out, const torch::Tensor& bias,
                            const torch::Tensor& x_mask) {
  if (!x.is_cuda() || x.dim() != 3 || x.scalar_type() != torch::kFloat || !x.is_contiguous() || x.size(1) % 2 != 0) {
    return false;
  }
  const auto o = out.scalar_type();
  if (out.sizes() != x.sizes() || out.device() != x.device() || !is_channels_last_1d(out) ||
      (o != torch::kFloat && o != torch::kHalf && o != torch::kBFloat16)) {
    return false;
  }
  if (!bias.defined() || bias.dim() != 1 || bias.size(0) != x.size(1) || bias.scalar_type() != torch::kFloat ||
      bias.device() != x.device()) {
    return false;
  }
  return mask_fits(x_mask, x);
}

std::pair<torch::Tensor, torch::Tensor> coupling_affine(const torch::Tensor& x, const torch::Tensor& out,
                                                        const torch::Tensor& bias, const torch::Tensor& x_mask) {
  auto r = CouplingAffine::apply(x, out, bias, x_mask);
  return {r[0], r[1]};
}

bool fused_invconv_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask) {
  if (!x.is_cuda() || x.dim() != 3 || x.scalar_type() != torch::kFloat || x.size(1) % 4 != 0) return false;
  if (weight.dim() != 2 || weight.size(0) != 4 || weight.size(1) != 4 || weight.scalar_type() != torch::kFloat ||
      weight.device() != x.device()) {
    return false;
  }
  return mask_fits(x_mask, x);
}

torch::Tensor invconv_mix(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& x_mask) {
  return InvConvMix::apply(x, weight, x_mask);
}

bool fused_actnorm_applies(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                           const torch::Tensor& x_mask) {
  if (!x.is_cuda() || x.dim() != 3 || x.scalar_type() != torch::kFloat) return false;
  const int64_t c = x.size(1);
  for (const auto* p : {&logs, &bias}) {
    if (p->scalar_type() != torch::kFloat || p->device() != x.device() || p->numel() != c) return false;
  }
  return mask_fits(x_mask, x);
}

torch::Tensor actnorm_affine(const torch::Tensor& x, const torch::Tensor& logs, const torch::Tensor& bias,
                             const torch::Tensor& x_mask) {
  return ActNormAffine::apply(x, logs, bias, x_mask);
}

}  // namespace monoflow::models::cuda
