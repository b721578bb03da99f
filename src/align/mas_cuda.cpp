// Torch-side dispatch of the CUDA backends: device, dtype and length handling, buffers
// from the caching allocator, launches on the current stream, and one read-back of the
// error flags (the only host synchronisation).
#include "align/mas_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>

#include "align/kernels/mas_kernels.h"
#include "align/mas_checks.h"
#include "align/path_format.h"
#include "common/error.h"

namespace monoflow::align {
namespace {

void check_launch(cudaError_t error, const char* what) {
  TORCH_CHECK(error == cudaSuccess, "maximum_path: ", what, " failed: ", cudaGetErrorString(error));
}

// int32 lengths on logp's device; out-of-range values stay out of range for the kernels.
torch::Tensor device_lengths(const torch::Tensor& lengths, const torch::Device& device,
                             int64_t limit) {
  torch::Tensor l = lengths.to(device, /*non_blocking=*/true);
  if (l.scalar_type() != torch::kInt32) l = l.clamp(-1, limit + 1).to(torch::kInt32);
  return l.contiguous();
}

// Host-side lengths check: throws the detailed UserError for bad lengths.
void check_lengths_on_host(const torch::Tensor& text_lengths, const torch::Tensor& mel_lengths,
                           int64_t batch, int64_t max_text, int64_t max_mel) {
  const torch::Tensor t = text_lengths.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor s = mel_lengths.to(torch::kCPU, torch::kInt64).contiguous();
  check_mas_lengths(t.data_ptr<int64_t>(), s.data_ptr<int64_t>(), batch, max_text, max_mel);
}

// Reads the kernels' flags (synchronises the stream) and throws what they report.
void raise_flags(const torch::Tensor& flags, const torch::Tensor& text_lengths,
                 const torch::Tensor& mel_lengths, int64_t batch, int64_t max_text,
                 int64_t max_mel) {
  const torch::Tensor host = flags.to(torch::kCPU);
  const int32_t* f = host.data_ptr<int32_t>();
  if (f[0] != 0) {
    check_lengths_on_host(text_lengths, mel_lengths, batch, max_text, max_mel);
    TORCH_CHECK(false, "maximum_path: the kernel rejected item ", batch - f[0],
                "'s lengths, the host check did not");
  }
  if (f[1] != 0) throw UserError(nonfinite_message(batch - f[1]));
}

int rows_per_lane_for(const MasOptions& options, int64_t batch, int64_t max_text) {
  if (options.fast_rows_per_lane != 0) {
    if (options.fast_rows_per_lane != 4 && options.fast_rows_per_lane != 8) {
      throw UserError("maximum_path: fast_rows_per_lane must be 0 (automatic), 4 or 8, got " +
                      std::to_string(options.fast_rows_per_lane));
    }
    return options.fast_rows_per_lane;
  }
  // K=4 when one warp per scheduler still covers the batch (shorter column steps), else K=8.
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t warps_k4 = batch * ((max_text + 127) / 128);
  return warps_k4 <= 4 * sms ? 4 : 8;
}

}  // namespace

bool cuda_device_present() { return torch::cuda::is_available(); }

MasResult maximum_path_cuda(torch::Tensor logp, const torch::Tensor& text_lengths,
                            const torch::Tensor& mel_lengths, const MasOptions& options) {
  const c10::cuda::CUDAGuard guard(logp.device());
  const int64_t batch = logp.size(0), max_text = logp.size(1), max_mel = logp.size(2);
  if (batch > 0 && (max_text == 0 || max_mel == 0)) {
    check_lengths_on_host(text_lengths, mel_lengths, batch, max_text, max_mel);
  }
  // In place on the caller's tensor when it is float32 and contiguous, as Super-MAS does.
  torch::Tensor work = logp;
  if (work.scalar_type() != torch::kFloat32 || !work.is_contiguous()) {
    work = work.to(torch::kFloat32).contiguous();
  } else if (options.keep_input) {
    work = work.clone();
  }
  const PathFormat format = path_format(options.path_dtype);
  const auto device = logp.device();
  const torch::Tensor tl = device_lengths(text_lengths, device, max_text);
  const torch::Tensor ml = device_lengths(mel_lengths, device, max_mel);
  torch::Tensor durations = torch::zeros({batch, max_text}, torch::dtype(torch::kInt32).device(device));
  torch::Tensor path;
  if (options.want_path) {
    path = torch::zeros({batch, max_text, max_mel}, torch::dtype(options.path_dtype).device(device));
  }
  torch::Tensor flags = torch::zeros({2}, torch::dtype(torch::kInt32).device(device));
  check_launch(kernels::launch_super_mas(work.data_ptr<float>(), batch, max_text, max_mel,
                                         tl.data_ptr<int32_t>(), ml.data_ptr<int32_t>(),
                                         options.neg_inf, path.defined() ? path.data_ptr() : nullptr,
                                         format.bytes, format.one, durations.data_ptr<int32_t>(),
                                         flags.data_ptr<int32_t>(),
                                         at::cuda::getCurrentCUDAStream().stream()),
               "super-MAS kernel");
  raise_flags(flags, text_lengths, mel_lengths, batch, max_text, max_mel);
  MasResult result;
  result.path = path;
  if (options.want_durations) result.durations = durations;
  return result;
}

MasResult maximum_path_cuda_fast(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                                 const torch::Tensor& mel_lengths, const MasOptions& options) {
  const c10::cuda::CUDAGuard guard(logp.device());
  const int64_t batch = logp.size(0), max_text = logp.size(1), max_mel = logp.size(2);
  if (batch > 0 && (max_text == 0 || max_mel == 0)) {
    check_lengths_on_host(text_lengths, mel_lengths, batch, max_text, max_mel);
  }
  TORCH_CHECK(max_text < (1 << 24) && max_mel < (1 << 24), "maximum_path: shape too large");
  // Read only: logp is never written, so keep_input needs no copy.
  torch::Tensor work = logp;
  if (work.scalar_type() != torch::kFloat32 || !work.is_contiguous()) {
    work = work.to(torch::kFloat32).contiguous();
  }
  const PathFormat format = path_format(options.path_dtype);
  const auto device = logp.device();
  const auto ints = torch::dtype(torch::kInt32).device(device);
  const torch::Tensor tl = device_lengths(text_lengths, device, max_text);
  const torch::Tensor ml = device_lengths(mel_lengths, device, max_mel);

  const auto layout = kernels::fast_mas_layout(static_cast<int>(batch), static_cast<int>(max_text),
                                               static_cast<int>(max_mel),
                                               rows_per_lane_for(options, batch, max_text));
  torch::Tensor bits = torch::empty({layout.bit_words()}, ints);
  torch::Tensor boundary = torch::empty({layout.boundary_floats()}, torch::dtype(torch::kFloat32).device(device));
  torch::Tensor flags_and_sync = torch::zeros({2 + layout.sync_ints()}, ints);
  torch::Tensor durations = torch::empty({batch, max_text}, ints);
  torch::Tensor starts = torch::empty({batch, max_text}, ints);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  int32_t* flags = flags_and_sync.data_ptr<int32_t>();
  auto* bit_words = reinterpret_cast<uint32_t*>(bits.data_ptr<int32_t>());

  check_launch(kernels::launch_fast_mas_forward(
                   work.data_ptr<float>(), batch, max_text, max_mel, tl.data_ptr<int32_t>(),
                   ml.data_ptr<int32_t>(), options.neg_inf, layout, bit_words,
                   boundary.data_ptr<float>(), flags + 2, flags, stream),
               "cuda-fast forward kernel");
  check_launch(kernels::launch_fast_mas_walk(bit_words, batch, max_text, max_mel,
                                             tl.data_ptr<int32_t>(), ml.data_ptr<int32_t>(),
                                             layout, durations.data_ptr<int32_t>(),
                                             starts.data_ptr<int32_t>(), stream),
               "cuda-fast walk kernel");
  MasResult result;
  if (options.want_path) {
    result.path = torch::empty({batch, max_text, max_mel}, torch::dtype(options.path_dtype).device(device));
    check_launch(kernels::launch_path_from_durations(
                     starts.data_ptr<int32_t>(), durations.data_ptr<int32_t>(), batch, max_text,
                     max_mel, result.path.data_ptr(), format.bytes, format.one, stream),
                 "path kernel");
  }
  raise_flags(flags_and_sync.slice(0, 0, 2), text_lengths, mel_lengths, batch, max_text, max_mel);
  if (options.want_durations) result.durations = durations;
  return result;
}

}  // namespace monoflow::align
