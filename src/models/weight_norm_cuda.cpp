#include "models/weight_norm_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "models/cuda_dispatch.h"
#include "models/kernels/weight_norm_kernels.h"

namespace monoflow::models::cuda {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [o, c, k] in the layout the convolutions read: ChannelsLast order where k > 1.
torch::Tensor empty_weight(const torch::Tensor& v, torch::ScalarType dtype) {
  const int64_t o = v.size(0), c = v.size(1), k = v.size(2);
  const auto options = v.options().dtype(dtype);
  return k > 1 ? torch::empty_strided({o, c, k}, {k * c, 1, c}, options) : torch::empty({o, c, k}, options);
}

torch::Tensor in_weight_layout(const torch::Tensor& grad, const torch::Tensor& like) {
  auto g = grad.to(like.scalar_type());
  if (g.strides() == like.strides()) return g;
  auto out = torch::empty_strided(like.sizes(), like.strides(), like.options());
  return out.copy_(g);
}

// Calls launch(batch) for the weights in groups of kWeightNormBatch, with each weight's shape,
// v, g and norm filled in; describe(i, t) adds the direction's own pointers.
template <typename Describe, typename Launch>
void for_each_batch(const std::vector<torch::Tensor>& vs, const std::vector<torch::Tensor>& gs,
                    const torch::Tensor& norms, const std::vector<int64_t>& row_offsets, Describe&& describe,
                    Launch&& launch) {
  for (size_t first = 0; first < vs.size(); first += kernels::kWeightNormBatch) {
    kernels::WeightNormBatch batch{};
    batch.count = static_cast<int>(std::min<size_t>(kernels::kWeightNormBatch, vs.size() - first));
    for (int j = 0; j < batch.count; ++j) {
      const size_t i = first + j;
      auto& t = batch.t[j];
      t.rows = static_cast<int>(vs[i].size(0));
      t.c_in = static_cast<int>(vs[i].size(1));
      t.k = static_cast<int>(vs[i].size(2));
      t.kc_order = t.k > 1;
      t.v = data_as<float>(vs[i]);
      t.g = data_as<float>(gs[i]);
      t.norm = data_as<float>(norms) + row_offsets[i];
      describe(i, t);
      batch.max_rows = std::max(batch.max_rows, t.rows);
    }
    launch(batch);
  }
}

class BatchedWeightNorm : public torch::autograd::Function<BatchedWeightNorm> {
 public:
  // TensorList, not std::vector: autograd takes the elements of a TensorList as inputs, but
  // treats a std::vector argument as one non-tensor (the outputs then had no gradient).
  static variable_list forward(AutogradContext* ctx, torch::TensorList vs_list, torch::TensorList gs_list,
                               int64_t dtype_code) {
    const std::vector<torch::Tensor> vs = vs_list.vec(), gs = gs_list.vec();
    const c10::cuda::CUDAGuard guard(vs[0].device());
    const auto dtype = static_cast<torch::ScalarType>(dtype_code);
    int64_t rows = 0;
    std::vector<int64_t> row_offsets;
    for (const auto& v : vs) {
      row_offsets.push_back(rows);
      rows += v.size(0);
    }
    auto norms = torch::empty({rows}, vs[0].options());
    variable_list ws;
    for (const auto& v : vs) ws.push_back(empty_weight(v, dtype));
    const auto stream = at::cuda::getCurrentCUDAStream();
    dispatch_kernel_dtype(dtype, "batched weight norm", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      for_each_batch(
          vs, gs, norms, row_offsets, [&](size_t i, kernels::WeightNormTensor& t) { t.w = ws[i].data_ptr(); },
          [&](const kernels::WeightNormBatch& b) {
            check_launch(kernels::launch_weight_norm_forward<T>(b, stream), "weight norm forward");
          });
    });
    variable_list saved(vs.begin(), vs.end());
    saved.insert(saved.end(), gs.begin(), gs.end());
    saved.push_back(norms);
    ctx->save_for_backward(saved);
    ctx->saved_data["row_offsets"] = row_offsets;
    ctx->saved_data["dtype"] = dtype_code;
    return ws;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const size_t n = (saved.size() - 1) / 2;
    const std::vector<torch::Tensor> vs(saved.begin(), saved.begin() + n), gs(saved.begin() + n, saved.begin() + 2 * n);
    const torch::Tensor norms = saved.back();
    const auto row_offsets = ctx->saved_data["row_offsets"].toIntVector();
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const c10::cuda::CUDAGuard guard(vs[0].device());
    variable_list grad_ws, out(2 * n + 1);
    for (size_t i = 0; i < n; ++i) {
      grad_ws.push_back(in_weight_layout(grads[i], empty_weight(vs[i], dtype)));
      out[i] = torch::empty_like(vs[i]);
      out[n + i] = torch::empty_like(gs[i]);
    }
    const auto stream = at::cuda::getCurrentCUDAStream();
    dispatch_kernel_dtype(dtype, "batched weight norm", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      for_each_batch(
          vs, gs, norms, row_offsets,
          [&](size_t i, kernels::WeightNormTensor& t) {
            t.grad_w = grad_ws[i].data_ptr();
            t.grad_v = data_as<float>(out[i]);
            t.grad_g = data_as<float>(out[n + i]);
          },
          [&](const kernels::WeightNormBatch& b) {
            check_launch(kernels::launch_weight_norm_backward<T>(b, stream), "weight norm backward");
          });
    });
    return out;  // the last entry, dtype_code's, stays undefined
  }
};

}  // namespace

bool batched_weight_norm_applies(const std::vector<torch::Tensor>& vs, const std::vector<torch::Tensor>& gs,
                                 torch::ScalarType dtype) {
  if (vs.empty() || vs.size() != gs.size() || !kernel_dtype(dtype)) return false;
  for (size_t i = 0; i < vs.size(); ++i) {
    const auto &v = vs[i], &g = gs[i];
    if (!v.is_cuda() || v.scalar_type() != torch::kFloat || v.dim() != 3 || !v.is_contiguous()) return false;
    if (g.device() != v.device() || g.scalar_type() != torch::kFloat || g.numel() != v.size(0) ||
        !g.is_contiguous()) {
      return false;
    }
  }
  return true;
}

std::vector<torch::Tensor> batched_weight_norm(const std::vector<torch::Tensor>& vs,
                                               const std::vector<torch::Tensor>& gs, torch::ScalarType dtype) {
  TORCH_CHECK(batched_weight_norm_applies(vs, gs, dtype), "batched_weight_norm: unsupported inputs");
  return BatchedWeightNorm::apply(torch::TensorList(vs), torch::TensorList(gs), static_cast<int64_t>(dtype));
}

}  // namespace monoflow::models::cuda
