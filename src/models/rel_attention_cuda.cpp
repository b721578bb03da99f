#include "models/rel_attention_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <type_traits>

#include "models/cuda_dispatch.h"
#include "models/kernels/rel_attention_kernels.h"
#include "models/philox_state_cuda.h"

namespace monoflow::models::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

kernels::RelativeRows rows_of(const torch::Tensor& q, const torch::Tensor& emb) {
  return {q.size(0), q.size(1), q.size(2), (emb.size(1) - 1) / 2, static_cast<float>(std::sqrt(double(q.size(3))))};
}

// sum over items and heads of a^T b, a [b, h, l, n], b [b, h, l, d]: an embedding's gradient [1, n, d].
torch::Tensor summed_products(const torch::Tensor& a, const torch::Tensor& b) {
  return torch::matmul(a.transpose(-2, -1), b).sum(at::IntArrayRef{0, 1}).unsqueeze(0);
}

// The products that make the output and q's, k's and v's gradients write them as [b, h, d, l],
// returned as their [b, h, l, d] transposes: the layout of the [b, h * d, l] convolution outputs
// that the caller views as q, k and v and turns the output back into, so that neither the
// output's transpose nor the gradients' views copy (24 copies of [B, 192, T] a step).

// [b, h, m, n] as [b * h, m, n]: a view where the strides allow (sizes spelled out: -1 is
// ambiguous for an empty tensor).
torch::Tensor batched(const torch::Tensor& x) {
  return x.reshape({x.size(0) * x.size(1), x.size(-2), x.size(-1)});
}

// (a @ b) transposed, contiguous [b, h, n, m], for a [b, h, m, k] and b [b, h, k, n]: b^T a^T.
torch::Tensor transposed_product(const torch::Tensor& a, const torch::Tensor& b) {
  return at::bmm(batched(b.transpose(-2, -1)), batched(a.transpose(-2, -1)))
      .view({a.size(0), a.size(1), b.size(-1), a.size(-2)});
}

// x [b, h, l, k] @ m [k, n] as a contiguous [b, h, l, n], m broadcast over the batch (no copy of
// it, and none of x where x is a transposed view).
torch::Tensor band_product(const torch::Tensor& x, const torch::Tensor& m) {
  const auto rows = batched(x);
  return at::bmm(rows, m.unsqueeze(0).expand({rows.size(0), m.size(0), m.size(1)}))
      .view({x.size(0), x.size(1), x.size(2), m.size(1)});
}

// out_t [b, h, d, l] (contiguous) += (x [b, h, l, n] @ emb [1, n, d]) transposed.
void add_band_product_t(const torch::Tensor& out_t, const torch::Tensor& x, const torch::Tensor& emb) {
  const int64_t rows = out_t.size(0) * out_t.size(1);
  const auto emb_t = emb[0].t().unsqueeze(0).expand({rows, emb.size(2), emb.size(1)});
  out_t.view({rows, out_t.size(2), out_t.size(3)}).baddbmm_(emb_t, batched(x.transpose(-2, -1)));
}

class RelativeAttention : public torch::autograd::Function<RelativeAttention> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& emb_k, const torch::Tensor& emb_v,
                               const torch::Tensor& mask_in, double dropout_p) {
    const c10::cuda::CUDAGuard guard(q.device());
    const kernels::RelativeRows rows = rows_of(q, emb_k);
    const torch::Tensor mask = mask_in.to(torch::kFloat).contiguous();
    const torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)).contiguous();   // [b, h, l, l]
    const torch::Tensor rel = band_product(q, emb_k[0].t());                           // [b, h, l, 2w+1]
    const kernels::PhiloxDropout dropout = start_dropout(dropout_p, q.device());
    const torch::Tensor weights = torch::empty_like(scores);
    const torch::Tensor dropped = dropout.enabled ? torch::empty_like(scores) : weights;
    const torch::Tensor band = torch::empty_like(rel);
    dispatch_kernel_dtype(q.scalar_type(), "relative attention", [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      check_launch(kernels::launch_relative_softmax_forward(data_as<T>(scores), data_as<T>(rel), mask.data_ptr<float>(),
                                                            data_as<T>(weights), data_as<T>(dropped), data_as<T>(band),
                                                            rows, dropout, at::cuda::getCurrentCUDAStream()),
                   "relative attention forward");
    });
    const torch::Tensor out_t = transposed_product(dropped, v);
    add_band_product_t(out_t, band, emb_v);
    ctx->save_for_backward({q, k, v, emb_k, emb_v, mask, weights, dropped, band});
    save_dropout(ctx, dropout);
    return out_t.transpose(-2, -1);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &emb_k = saved[3], &emb_v = saved[4],
                        &mask = saved[5], &weights = saved[6], &dropped = saved[7], &band = saved[8];
    const c10::cuda::CUDAGuard guard(q.device());
    const kernels::RelativeRows rows = rows_of(q, emb_k);
    const kernels::PhiloxDropout dropout = saved_dropout(ctx);
    const torch::Tensor& grad_out = grads[0];
    const torch::Tensor grad_v_t = transposed_product(dropped.transpose(-2, -1), grad_out);
    const torch::Tensor grad_emb_v = summed_products(band, grad_out);
    torch::Tensor grad = torch::matmul(grad_out, v.transpose(-2, -1)).contiguous();    // dP, then dS in place
    const torch::Tensor grad_band = band_product(grad_out, emb_v[0].t());
    const torch::Tensor grad_rel = torch::empty_like(grad_band);
    dispatch_kernel_dtype(q.scalar_type(), "relative attention", [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      check_launch(kernels::launch_relative_softmax_backward(data_as<T>(grad), data_as<T>(grad_band),
                                                             data_as<T>(weights), mask.data_ptr<float>(),
                                                             data_as<T>(grad_rel), rows, dropout,
                                                             at::cuda::getCurrentCUDAStream()),
                   "relative attention backward");
    });
    const torch::Tensor grad_q_t = transposed_product(grad, k);
    add_band_product_t(grad_q_t, grad_rel, emb_k);
    const torch::Tensor grad_k_t = transposed_product(grad.transpose(-2, -1), q);
    const torch::Tensor grad_emb_k = summed_products(grad_rel, q);
    return {grad_q_t.transpose(-2, -1), grad_k_t.transpose(-2, -1), grad_v_t.transpose(-2, -1), grad_emb_k,
            grad_emb_v, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool fused_relative_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& emb_k, const torch::Tensor& emb_v,
                                      const torch::Tensor& mask) {
  if (!q.defined() || !q.is_cuda() || q.dim() != 4 || !emb_k.defined() || !emb_v.defined() || !mask.defined()) {
    return false;
  }
  const auto device = q.device();
  if (!kernel_dtype(q.scalar_type())) return false;
  for (const auto* t : {&q, &k, &v, &emb_k, &emb_v}) {
    if (t->scalar_type() != q.scalar_type() || t->device() != device) return false;
  }
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), d = q.size(3);
  const int64_t n = emb_k.size(1);
  return k.sizes() == q.sizes() && v.sizes() == q.sizes() && emb_k.dim() == 3 && n % 2 == 1 &&
         emb_k.sizes() == emb_v.sizes() && emb_k.size(0) == 1 && emb_k.size(2) == d && mask.device() == device &&
         mask.sizes() == at::IntArrayRef{b, 1, l, l} && h > 0;
}

torch::Tensor relative_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& emb_k, const torch::Tensor& emb_v, const torch::Tensor& mask,
                                 double dropout_p) {
  return RelativeAttention::apply(q, k, v, emb_k, emb_v, mask, dropout_p);
}

}  // namespace monoflow::models::cuda
