#include <c10/cuda/CUDAGuard.h>
#include <ATen/cuda/CUDAContext.h>

#include "models/cuda_dispatch.h"
#include "models/kernels/column_sums_kernels.h"

namespace monoflow::models::cuda {

torch::Tensor column_sums(const torch::Tensor& rows_in, torch::ScalarType dtype) {
  TORCH_CHECK(rows_in.dim() == 2, "column_sums: rows must be [N, C], got ", rows_in.sizes());
  const torch::Tensor rows = rows_in.contiguous();
  const int64_t n = rows.size(0), c = rows.size(1);
  torch::Tensor out;  // stays undefined where the kernel does not apply
  if (rows.is_cuda() && kernel_dtype(rows.scalar_type())) {
    dispatch_kernel_dtype(rows.scalar_type(), "column_sums", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      if (!kernels::column_sums_apply<T>(c, rows.data_ptr())) return;
      const c10::cuda::CUDAGuard guard(rows.device());
      const auto f32 = rows.options().dtype(torch::kFloat);
      out = torch::empty({c}, f32);
      const int64_t blocks = kernels::column_sum_blocks(n);
      const torch::Tensor partials = blocks > 1 ? torch::empty({blocks, c}, f32) : torch::Tensor();
      check_launch(kernels::launch_column_sums<T>(data_as<T>(rows), n, c,
                                                  partials.defined() ? partials.data_ptr<float>() : nullptr,
                                                  out.data_ptr<float>(), at::cuda::getCurrentCUDAStream()),
                   "column_sums");
    });
  }
  if (!out.defined()) return rows.sum(at::IntArrayRef{0}, /*keepdim=*/false, torch::kFloat).to(dtype);
  return out.to(dtype);
}

}  // namespace monoflow::models::cuda
