// Backend names, availability and dispatch of maximum_path.
#include "align/mas.h"

#include <utility>

#include "align/mas_checks.h"
#include "align/mas_cpu.h"
#include "align/mas_tuning.h"
#include "common/error.h"
#ifdef MONOFLOW_HAS_CUDA
#include "align/mas_cuda.h"
#endif

namespace monoflow::align {

Backend parse_backend(const std::string& name) {
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  if (name == "cuda-fast") return Backend::kCudaFast;
  throw UserError("unknown MAS backend '" + name + "'; choose cpu, cuda or cuda-fast");
}

std::string backend_name(Backend backend) {
  switch (backend) {
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
    case Backend::kCudaFast: return "cuda-fast";
  }
  return "?";
}

bool backend_available(Backend backend) {
  if (backend == Backend::kCpu) return true;
#ifdef MONOFLOW_HAS_CUDA
  return cuda_device_present();
#else
  return false;
#endif
}

MasResult maximum_path(torch::Tensor logp, const torch::Tensor& text_lengths,
                       const torch::Tensor& mel_lengths, const MasOptions& options) {
  return maximum_path(std::move(logp), text_lengths, mel_lengths, options, FastMasTuning{});
}

MasResult maximum_path(torch::Tensor logp, const torch::Tensor& text_lengths,
                       const torch::Tensor& mel_lengths, const MasOptions& options,
                       const FastMasTuning& tuning) {
  if (!backend_available(options.backend)) {
#ifdef MONOFLOW_HAS_CUDA
    const char* why = "no CUDA device is present";
#else
    const char* why = "monoflow was built without CUDA";
#endif
    throw UserError("MAS backend '" + backend_name(options.backend) + "' is not available: " +
                    why + "; use backend 'cpu'");
  }
  check_mas_arguments(logp, text_lengths, mel_lengths, options);
  switch (options.backend) {
    case Backend::kCpu: return maximum_path_cpu(logp, text_lengths, mel_lengths, options);
#ifdef MONOFLOW_HAS_CUDA
    case Backend::kCuda: return maximum_path_cuda(logp, text_lengths, mel_lengths, options);
    case Backend::kCudaFast:
      return maximum_path_cuda_fast(logp, text_lengths, mel_lengths, options, tuning);
#else
    default: break;
#endif
  }
  TORCH_CHECK(false, "maximum_path: backend without an implementation");
}

}  // namespace monoflow::align
