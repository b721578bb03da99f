#include "models/channel_norm_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <type_traits>

#include "models/cuda_dispatch.h"
#include "models/kernels/channel_norm_kernels.h"

namespace monoflow::models::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Empty residual and mask tensors stand for none (cuda_dispatch.h's or_none).
class ChannelLayerNorm : public torch::autograd::Function<ChannelLayerNorm> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& residual_in,
                               const torch::Tensor& mask_in, const torch::Tensor& gamma, const torch::Tensor& beta,
                               double eps) {
    const c10::cuda::CUDAGuard guard(x_in.device());
    const torch::Tensor x = x_in.contiguous();
    const torch::Tensor residual = is_given(residual_in) ? residual_in.contiguous() : residual_in;
    const torch::Tensor mask = is_given(mask_in) ? mask_in.contiguous() : mask_in;
    const int64_t b = x.size(0), c = x.size(1), t = x.size(2);
    auto y = torch::empty_like(x);
    const auto stats = x.options().dtype(torch::kFloat);
    auto mean = torch::empty({b, t}, stats), rstd = torch::empty({b, t}, stats);
    dispatch_kernel_dtype(x.scalar_type(), "channel layer norm", [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      check_launch(kernels::launch_channel_norm_forward(
                       data_as<T>(x), is_given(residual) ? data_as<T>(residual) : nullptr, data_or_null<float>(mask),
                       gamma.contiguous().data_ptr<float>(), beta.contiguous().data_ptr<float>(), data_as<T>(y),
                       mean.data_ptr<float>(), rstd.data_ptr<float>(), b, c, t, static_cast<float>(eps),
                       at::cuda::getCurrentCUDAStream()),
                   "channel layer norm forward");
    });
    ctx->save_for_backward({x, residual, mask, gamma, mean, rstd});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &residual = saved[1], &mask = saved[2], &gamma = saved[3], &mean = saved[4],
                        &rstd = saved[5];
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t b = x.size(0), c = x.size(1), t = x.size(2);
    const torch::Tensor grad_y = grads[0].contiguous();
    auto grad_x = torch::empty_like(x);
    const int64_t rows = kernels::channel_norm_tiles(b, t);
    const auto sums = x.options().dtype(torch::kFloat);
    auto grad_gamma_rows = torch::empty({rows, c}, sums), grad_beta_rows = torch::empty({rows, c}, sums);
    dispatch_kernel_dtype(x.scalar_type(), "channel layer norm", [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      check_launch(kernels::launch_channel_norm_backward(
                       data_as<T>(grad_y), data_as<T>(x), is_given(residual) ? data_as<T>(residual) : nullptr,
                       data_or_null<float>(mask), gamma.contiguous().data_ptr<float>(), mean.data_ptr<float>(),
                       rstd.data_ptr<float>(), data_as<T>(grad_x), grad_gamma_rows.data_ptr<float>(),
                       grad_beta_rows.data_ptr<float>(), b, c, t, at::cuda::getCurrentCUDAStream()),
                   "channel layer norm backward");
    });
    // x and the residual enter as their sum: the same gradient.
    return {grad_x, is_given(residual) ? grad_x : torch::Tensor(), torch::Tensor(),
            column_sums(grad_gamma_rows, torch::kFloat), column_sums(grad_beta_rows, torch::kFloat), torch::Tensor()};
  }
};

bool same_float_cuda(const torch::Tensor& t, const torch::Tensor& like) {
  return t.is_cuda() && t.scalar_type() == torch::kFloat && t.device() == like.device();
}

bool same_cuda_type(const torch::Tensor& t, const torch::Tensor& like) {
  return t.is_cuda() && t.scalar_type() == like.scalar_type() && t.device() == like.device();
}

}  // namespace

bool fused_channel_norm_applies(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                const torch::Tensor& residual, const torch::Tensor& mask) {
  if (!(x.is_cuda() && x.dim() == 3 && kernel_dtype(x.scalar_type()) && same_float_cuda(gamma, x) &&
        same_float_cuda(beta, x) && gamma.dim() == 1 && beta.dim() == 1 && gamma.size(0) == x.size(1) &&
        beta.size(0) == x.size(1))) {
    return false;
  }
  if (residual.defined() && !(same_cuda_type(residual, x) && residual.sizes() == x.sizes())) return false;
  // The kernel passes no gradient to the mask (a sequence mask needs none).
  return !mask.defined() || (same_float_cuda(mask, x) && !mask.requires_grad() && mask.dim() == 3 &&
                             mask.size(0) == x.size(0) && mask.size(1) == 1 && mask.size(2) == x.size(2));
}

torch::Tensor channel_layer_norm(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                 double eps, const torch::Tensor& residual, const torch::Tensor& mask) {
  return ChannelLayerNorm::apply(x, or_none(residual, x.options()), or_none(mask, x.options()), gamma, beta, eps);
}

}  // namespace monoflow::models::cuda
