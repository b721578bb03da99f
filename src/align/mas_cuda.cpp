// Torch-side dispatch of the CUDA backends: device, dtype and length handling, buffers
// from the caching allocator, launches on the current stream, and one read-back of the
// error flags (the only host synchronisation), or none when the caller takes the flags
// (MasOptions::deferred_flags, for graph capture). Few torch calls per run: at
// training-batch shapes the kernels take tens of microseconds, so host overhead matters.
#include "align/mas_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>

#include <optional>

#include "align/kernels/mas_kernels.h"
#include "align/mas_checks.h"
#include "align/path_format.h"
#include "common/error.h"

namespace monoflow::align {
namespace {

void check_cuda(cudaError_t error, const char* what) {
  TORCH_CHECK(error == cudaSuccess, "maximum_path: ", what, " failed: ", cudaGetErrorString(error));
}

// Lengths as the kernels read them: int32 or int64, contiguous, on logp's device. The
// tensor keeps converted storage alive for the run.
struct Lengths {
  torch::Tensor tensor;
  kernels::DeviceLengths view;
};
Lengths device_lengths(const torch::Tensor& lengths, const torch::Device& device) {
  Lengths l;
  l.tensor = lengths;
  const auto dtype = lengths.scalar_type();
  if (lengths.device() != device || (dtype != torch::kInt32 && dtype != torch::kInt64) ||
      !lengths.is_contiguous()) {
    l.tensor = lengths.to(device, torch::kInt64).contiguous();
  }
  l.view = {l.tensor.data_ptr(), l.tensor.scalar_type() == torch::kInt64};
  return l;
}

// Host-side lengths check: throws the detailed UserError for bad lengths.
void check_lengths_on_host(const torch::Tensor& text_lengths, const torch::Tensor& mel_lengths,
                           int64_t batch, int64_t max_text, int64_t max_mel) {
  const torch::Tensor t = text_lengths.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor s = mel_lengths.to(torch::kCPU, torch::kInt64).contiguous();
  check_mas_lengths(t.data_ptr<int64_t>(), s.data_ptr<int64_t>(), batch, max_text, max_mel);
}

// Reads the kernels' two flags through pinned memory (waits for the stream) and throws what
// they report.
void raise_flags(const int32_t* device_flags, int count, cudaStream_t stream,
                 const torch::Tensor& text_lengths, const torch::Tensor& mel_lengths,
                 int64_t batch, int64_t max_text, int64_t max_mel) {
  thread_local int32_t* pinned = nullptr;
  if (!pinned) check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 3 * sizeof(int32_t),
                                        cudaHostAllocDefault), "pinned flag buffer");
  check_cuda(cudaMemcpyAsync(pinned, device_flags, count * sizeof(int32_t), cudaMemcpyDeviceToHost, stream),
             "flag read-back");
  check_cuda(cudaStreamSynchronize(stream), "MAS kernels");
  const int32_t bad_lengths = pinned[0], non_finite = pinned[1];
  TORCH_CHECK(count < 3 || pinned[2] == 0, "maximum_path: cuda-fast hand-over between warps timed out");
  if (bad_lengths != 0) {
    check_lengths_on_host(text_lengths, mel_lengths, batch, max_text, max_mel);
    TORCH_CHECK(false, "maximum_path: the kernel rejected item ", batch - bad_lengths,
                "'s lengths, the host check did not");
  }
  if (non_finite != 0) throw NonFiniteError(batch - non_finite, nonfinite_message(batch - non_finite));
}

// The kernels' flags (`count` int32 on the device): into the caller's deferred buffer without
// waiting, or read back and raised now.
void finish_flags(const torch::Tensor& flags, const MasOptions& options, cudaStream_t stream,
                  const torch::Tensor& text_lengths, const torch::Tensor& mel_lengths, int64_t batch,
                  int64_t max_text, int64_t max_mel) {
  const auto count = flags.numel();
  if (options.deferred_flags.defined()) {
    const torch::Tensor& out = options.deferred_flags;
    TORCH_CHECK(out.scalar_type() == torch::kInt32 && out.numel() == kMasFlagCount && out.is_contiguous() &&
                    out.device() == flags.device(),
                "maximum_path: deferred_flags must be a contiguous int32 [", int(kMasFlagCount),
                "] tensor on logp's device");
    out.narrow(0, 0, count).copy_(flags);
    if (count < kMasFlagCount) out.narrow(0, count, kMasFlagCount - count).zero_();
    return;
  }
  raise_flags(flags.data_ptr<int32_t>(), static_cast<int>(count), stream, text_lengths, mel_lengths, batch,
              max_text, max_mel);
}

// Rows per lane for the split kernels (v3; 4 or 8).
int rows_per_lane_for(const FastMasTuning& tuning, int64_t batch, int64_t max_text) {
  if (tuning.rows_per_lane != 0) {
    if (tuning.rows_per_lane == 2) {
      throw UserError("maximum_path: rows_per_lane 2 exists for cuda-fast kernel 4 (fused) only");
    }
    return tuning.rows_per_lane;
  }
  // K=4 while its warps (one per block) all fit on the GPU at once: 4 per SM with 3 stages
  // of 16 KB tiles. Beyond that, K=8 halves the warp count.
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t warps_k4 = batch * ((max_text + 127) / 128);
  return warps_k4 <= 4 * sms ? 4 : 8;
}

void check_tuning(const FastMasTuning& tuning) {
  if (tuning.rows_per_lane != 0 && tuning.rows_per_lane != 2 && tuning.rows_per_lane != 4 &&
      tuning.rows_per_lane != 8) {
    throw UserError("maximum_path: rows_per_lane must be 0 (automatic), 2, 4 or 8, got " +
                    std::to_string(tuning.rows_per_lane));
  }
  if (tuning.kernel == 1 || tuning.kernel == 2) {
    throw UserError("maximum_path: cuda-fast kernels 1 and 2 are not in production; "
                    "dev/cuda/mas_fast.cu runs them");
  }
  if (tuning.kernel != 0 && tuning.kernel != 3 && tuning.kernel != 4) {
    throw UserError("maximum_path: cuda-fast kernel must be 0 (automatic), 3 or 4, got " +
                    std::to_string(tuning.kernel));
  }
}

// The fused v4 layout when v4 is asked for or chosen by default and its block fits the
// device's shared memory (K=2 first: faster at the training batch), else nothing.
std::optional<kernels::FastMasLayout> fused_layout_for(const FastMasTuning& tuning, int64_t batch,
                                                       int64_t max_text, int64_t max_mel) {
  if (tuning.kernel != 0 && tuning.kernel != 4) return std::nullopt;
  const int64_t limit = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin;
  for (const int k : {2, 4}) {
    if (tuning.rows_per_lane != 0 && k != tuning.rows_per_lane) continue;
    const auto layout = kernels::fast_mas_layout(static_cast<int>(batch), static_cast<int>(max_text),
                                                 static_cast<int>(max_mel), k);
    const int64_t bytes = kernels::fast_mas_fused_smem(layout);
    if (bytes >= 0 && bytes <= limit) return layout;
  }
  if (tuning.kernel == 4) {
    throw UserError("maximum_path: cuda-fast kernel 4 does not fit this shape (one block per "
                    "utterance; see kernels/mas_fast_fused.cu); use kernel 0 (automatic)");
  }
  return std::nullopt;
}

// The split kernels (v3): workspace resets, the forward kernel, then the walk kernel.
void run_split_kernels(const torch::Tensor& work, int64_t max_text, int64_t max_mel,
                       const Lengths& tl, const Lengths& ml, const MasOptions& options,
                       const kernels::FastMasLayout& layout, int32_t* ws,
                       torch::Tensor& durations, cudaStream_t stream) {
  check_cuda(cudaMemsetAsync(ws, 0, layout.zeroed_ints * sizeof(int32_t), stream), "workspace reset");
  check_cuda(cudaMemsetAsync(ws + layout.boundary_offset, 0, layout.boundary_ints * sizeof(int32_t), stream),
             "boundary reset");
  check_cuda(kernels::launch_fast_mas_forward(work.data_ptr<float>(), static_cast<int>(max_text),
                                              static_cast<int>(max_mel), tl.view, ml.view,
                                              options.neg_inf, layout, ws, stream),
             "cuda-fast forward kernel");
  check_cuda(kernels::launch_fast_mas_walk(static_cast<int>(max_text), static_cast<int>(max_mel),
                                           tl.view, ml.view, layout, ws,
                                           durations.data_ptr<int32_t>(), stream),
             "cuda-fast walk kernel");
}

// float32 contiguous logp; a copy only when the input is not already that.
torch::Tensor as_float32(const torch::Tensor& logp) {
  if (logp.scalar_type() == torch::kFloat32 && logp.is_contiguous()) return logp;
  return logp.to(torch::kFloat32).contiguous();
}

}  // namespace

bool cuda_device_present() {
  static const bool present = torch::cuda::is_available();
  return present;
}

MasResult maximum_path_cuda(torch::Tensor logp, const torch::Tensor& text_lengths,
                            const torch::Tensor& mel_lengths, const MasOptions& options) {
  const c10::cuda::CUDAGuard guard(logp.device());
  const int64_t batch = logp.size(0), max_text = logp.size(1), max_mel = logp.size(2);
  if (batch > 0 && (max_text == 0 || max_mel == 0)) {
    check_lengths_on_host(text_lengths, mel_lengths, batch, max_text, max_mel);
  }
  // In place on the caller's tensor when it is float32 and contiguous, as Super-MAS does.
  torch::Tensor work = as_float32(logp);
  if (options.keep_input && work.data_ptr() == logp.data_ptr()) work = work.clone();
  const PathFormat format = path_format(options.path_dtype);
  const auto device = logp.device();
  const Lengths tl = device_lengths(text_lengths, device), ml = device_lengths(mel_lengths, device);
  // One zeroed int32 buffer: flags, then the durations.
  torch::Tensor ints = torch::zeros({2 + batch * max_text}, torch::dtype(torch::kInt32).device(device));
  torch::Tensor path;
  if (options.want_path) {
    path = torch::zeros({batch, max_text, max_mel}, torch::dtype(options.path_dtype).device(device));
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  int32_t* flags = ints.data_ptr<int32_t>();
  check_cuda(kernels::launch_super_mas(work.data_ptr<float>(), batch, max_text, max_mel, tl.view,
                                       ml.view, options.neg_inf,
                                       path.defined() ? path.data_ptr() : nullptr, format.bytes,
                                       format.one, flags + 2, flags, stream),
             "super-MAS kernel");
  finish_flags(ints.narrow(0, 0, 2), options, stream, text_lengths, mel_lengths, batch, max_text, max_mel);
  MasResult result;
  result.path = path;
  if (options.want_durations) result.durations = ints.slice(0, 2).view({batch, max_text});
  return result;
}

MasResult maximum_path_cuda_fast(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                                 const torch::Tensor& mel_lengths, const MasOptions& options,
                                 const FastMasTuning& tuning) {
  const c10::cuda::CUDAGuard guard(logp.device());
  const int64_t batch = logp.size(0), max_text = logp.size(1), max_mel = logp.size(2);
  if (batch > 0 && (max_text == 0 || max_mel == 0)) {
    check_lengths_on_host(text_lengths, mel_lengths, batch, max_text, max_mel);
  }
  if (batch == 0) {
    MasResult empty;
    if (options.want_path) empty.path = torch::zeros(logp.sizes(), torch::dtype(options.path_dtype).device(logp.device()));
    if (options.want_durations) empty.durations = torch::zeros({0, max_text}, torch::dtype(torch::kInt32).device(logp.device()));
    return empty;
  }
  TORCH_CHECK(max_text < (1 << 24) && max_mel < (1 << 24), "maximum_path: shape too large");
  check_tuning(tuning);
  // Read only: logp is never written, so keep_input needs no copy.
  const torch::Tensor work = as_float32(logp);
  const PathFormat format = path_format(options.path_dtype);
  const auto device = logp.device();
  const auto ints = torch::dtype(torch::kInt32).device(device);
  const Lengths tl = device_lengths(text_lengths, device), ml = device_lengths(mel_lengths, device);
  const std::optional<kernels::FastMasLayout> fused = fused_layout_for(tuning, batch, max_text, max_mel);
  const auto layout = fused ? *fused
                            : kernels::fast_mas_layout(static_cast<int>(batch), static_cast<int>(max_text),
                                                       static_cast<int>(max_mel),
                                                       rows_per_lane_for(tuning, batch, max_text));
  // v4 uses the flags and the starts only; the split kernels the whole workspace.
  torch::Tensor workspace =
      torch::empty({fused ? layout.starts_offset + batch * max_text : layout.total_ints}, ints);
  torch::Tensor durations = torch::empty({batch, max_text}, ints);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  int32_t* ws = workspace.data_ptr<int32_t>();
  if (fused) {
    check_cuda(cudaMemsetAsync(ws, 0, 4 * sizeof(int32_t), stream), "flag reset");
    check_cuda(kernels::launch_fast_mas_fused(work.data_ptr<float>(), static_cast<int>(max_text),
                                              static_cast<int>(max_mel), tl.view, ml.view,
                                              options.neg_inf, layout, ws,
                                              durations.data_ptr<int32_t>(), stream),
               "cuda-fast fused kernel");
  } else {
    run_split_kernels(work, max_text, max_mel, tl, ml, options, layout, ws, durations, stream);
  }
  MasResult result;
  if (options.want_path) {
    result.path = torch::empty({batch, max_text, max_mel}, torch::dtype(options.path_dtype).device(device));
    check_cuda(kernels::launch_path_from_durations(
                   ws + layout.starts_offset, durations.data_ptr<int32_t>(), static_cast<int>(batch),
                   static_cast<int>(max_text), static_cast<int>(max_mel), result.path.data_ptr(),
                   format.bytes, format.one, stream),
               "path kernel");
  }
  finish_flags(workspace.narrow(0, 0, 3), options, stream, text_lengths, mel_lengths, batch, max_text, max_mel);
  if (options.want_durations) result.durations = durations;
  return result;
}

}  // namespace monoflow::align
