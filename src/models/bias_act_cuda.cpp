#include "models/bias_act_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <type_traits>

#include "models/cuda_dispatch.h"
#include "models/kernels/bias_act_kernels.h"
#include "models/philox_state_cuda.h"

namespace monoflow::models::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class BiasAct : public torch::autograd::Function<BiasAct> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& y, const torch::Tensor& bias,
                               const torch::Tensor& mask_in, bool relu, double p) {
    const c10::cuda::CUDAGuard guard(y.device());
    const int64_t b = y.size(0), c = y.size(1), t = y.size(2);
    const torch::Tensor mask = is_given(mask_in) ? mask_in.to(torch::kFloat).contiguous() : torch::Tensor();
    const auto dropout = start_dropout(p, y.device());
    auto out = torch::empty_like(y);
    dispatch_kernel_dtype(y.scalar_type(), "bias_act", [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      check_launch(kernels::launch_bias_act_forward(data_as<T>(y), bias.contiguous().data_ptr<float>(),
                                                    data_or_null<float>(mask), data_as<T>(out), b, c, t, relu,
                                                    dropout, at::cuda::getCurrentCUDAStream()),
                   "bias_act forward");
    });
    // With ReLU the backward reads which elements passed from the output (the next
    // convolution keeps it for its weight's gradient anyway); without, from dropout's state.
    ctx->save_for_backward({relu ? out : torch::Tensor(), mask});
    ctx->saved_data["relu"] = relu;
    save_dropout(ctx, dropout);
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &out = saved[0], &mask = saved[1];
    const bool relu = ctx->saved_data["relu"].toBool();
    const auto dropout = saved_dropout(ctx);
    const torch::Tensor grad_out = grads[0].contiguous();
    const c10::cuda::CUDAGuard guard(grad_out.device());
    const int64_t b = grad_out.size(0), c = grad_out.size(1), t = grad_out.size(2);
    auto grad_y = torch::empty_like(grad_out);
    auto row_sums = torch::empty({b, c}, grad_out.options().dtype(torch::kFloat));
    dispatch_kernel_dtype(grad_out.scalar_type(), "bias_act", [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      check_launch(kernels::launch_bias_act_backward(data_as<T>(grad_out), relu ? data_as<T>(out) : nullptr,
                                                     data_or_null<float>(mask), data_as<T>(grad_y),
                                                     row_sums.data_ptr<float>(), b, c, t, relu, dropout,
                                                     at::cuda::getCurrentCUDAStream()),
                   "bias_act backward");
    });
    return {grad_y, column_sums(row_sums, torch::kFloat), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool fused_bias_act_applies(const torch::Tensor& y, const torch::Tensor& bias, const torch::Tensor& mask) {
  if (!y.is_cuda() || y.dim() != 3 || !kernel_dtype(y.scalar_type()) || !y.is_contiguous()) return false;
  if (!bias.defined() || bias.dim() != 1 || bias.size(0) != y.size(1) || bias.scalar_type() != torch::kFloat ||
      bias.device() != y.device()) {
    return false;
  }
  if (!mask.defined()) return true;
  return mask.dim() == 3 && mask.size(0) == y.size(0) && mask.size(1) == 1 && mask.size(2) == y.size(2) &&
         mask.device() == y.device();
}

torch::Tensor bias_act(const torch::Tensor& y, const torch::Tensor& bias, const torch::Tensor& mask, bool relu,
                       double p) {
  return BiasAct::apply(y, bias, or_none(mask, y.options()), relu, p);
}

}  // namespace monoflow::models::cuda
