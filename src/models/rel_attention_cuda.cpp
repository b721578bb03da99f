#include "models/rel_attention_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>

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

// x [b, h, l, n] (contiguous) @ emb [1, n, d], added into out [b, h, l, d] (contiguous).
void add_band_product(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& emb) {
  out.view({-1, out.size(-1)}).addmm_(x.view({-1, x.size(-1)}), emb[0]);
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
    const torch::Tensor rel = torch::matmul(q, emb_k[0].t()).contiguous();             // [b, h, l, 2w+1]
    const kernels::PhiloxDropout dropout = start_dropout(dropout_p, q.device());
    const torch::Tensor weights = torch::empty_like(scores);
    const torch::Tensor dropped = dropout.enabled ? torch::empty_like(scores) : weights;
    const torch::Tensor band = torch::empty_like(rel);
    check_launch(kernels::launch_relative_softmax_forward(scores.data_ptr<float>(), rel.data_ptr<float>(),
                                                          mask.data_ptr<float>(), weights.data_ptr<float>(),
                                                          dropped.data_ptr<float>(), band.data_ptr<float>(), rows,
                                                          dropout, at::cuda::getCurrentCUDAStream()),
                 "relative attention forward");
    torch::Tensor out = torch::matmul(dropped, v).contiguous();
    add_band_product(out, band, emb_v);
    ctx->save_for_backward({q, k, v, emb_k, emb_v, mask, weights, dropped, band});
    save_dropout(ctx, dropout);
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &emb_k = saved[3], &emb_v = saved[4],
                        &mask = saved[5], &weights = saved[6], &dropped = saved[7], &band = saved[8];
    const c10::cuda::CUDAGuard guard(q.device());
    const kernels::RelativeRows rows = rows_of(q, emb_k);
    const kernels::PhiloxDropout dropout = saved_dropout(ctx);
    const torch::Tensor& grad_out = grads[0];
    const torch::Tensor grad_v = torch::matmul(dropped.transpose(-2, -1), grad_out);
    const torch::Tensor grad_emb_v = summed_products(band, grad_out);
    torch::Tensor grad = torch::matmul(grad_out, v.transpose(-2, -1)).contiguous();    // dP, then dS in place
    const torch::Tensor grad_band = torch::matmul(grad_out, emb_v[0].t()).contiguous();
    const torch::Tensor grad_rel = torch::empty_like(grad_band);
    check_launch(kernels::launch_relative_softmax_backward(grad.data_ptr<float>(), grad_band.data_ptr<float>(),
                                                           weights.data_ptr<float>(), mask.data_ptr<float>(),
                                                           grad_rel.data_ptr<float>(), rows, dropout,
                                                           at::cuda::getCurrentCUDAStream()),
                 "relative attention backward");
    torch::Tensor grad_q = torch::matmul(grad, k).contiguous();
    add_band_product(grad_q, grad_rel, emb_k);
    const torch::Tensor grad_k = torch::matmul(grad.transpose(-2, -1), q);
    const torch::Tensor grad_emb_k = summed_products(grad_rel, q);
    return {grad_q, grad_k, grad_v, grad_emb_k, grad_emb_v, torch::Tensor(), torch::Tensor()};
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
  for (const auto* t : {&q, &k, &v, &emb_k, &emb_v}) {
    if (t->scalar_type() != torch::kFloat || t->device() != device) return false;
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
