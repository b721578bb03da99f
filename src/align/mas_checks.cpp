#include "align/mas_checks.h"

#include <cmath>
#include <sstream>

#include "common/error.h"

namespace monoflow::align {
namespace {

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

void check_lengths_tensor(const torch::Tensor& lengths, const char* name, int64_t batch) {
  if (!lengths.defined()) throw UserError(std::string("maximum_path: ") + name + " is undefined");
  if (lengths.dim() != 1 || lengths.size(0) != batch) {
    throw UserError(std::string("maximum_path: ") + name + " must have shape [B] = [" +
                    std::to_string(batch) + "], got " + shape_of(lengths));
  }
  if (!c10::isIntegralType(lengths.scalar_type(), /*includeBool=*/false)) {
    throw UserError(std::string("maximum_path: ") + name + " must be an integer tensor, got " +
                    std::string(c10::toString(lengths.scalar_type())));
  }
}

}  // namespace

void check_mas_arguments(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                         const torch::Tensor& mel_lengths, const MasOptions& options) {
  if (!logp.defined()) throw UserError("maximum_path: logp is undefined");
  if (logp.dim() != 3) {
    throw UserError("maximum_path: logp must be [B, T_text, T_mel], got shape " + shape_of(logp));
  }
  const auto dtype = logp.scalar_type();
  if (dtype != torch::kFloat32 && dtype != torch::kFloat16 && dtype != torch::kBFloat16) {
    throw UserError("maximum_path: logp must be float32, float16 or bfloat16, got " +
                    std::string(c10::toString(dtype)));
  }
  check_lengths_tensor(text_lengths, "text_lengths", logp.size(0));
  check_lengths_tensor(mel_lengths, "mel_lengths", logp.size(0));
  if (!options.want_path && !options.want_durations) {
    throw UserError("maximum_path: options ask for neither the path nor the durations");
  }
  if (options.backend != Backend::kCpu && !logp.is_cuda()) {
    throw UserError("maximum_path: backend '" + backend_name(options.backend) +
                    "' needs logp on a CUDA device, got it on " + logp.device().str() +
                    "; move it to the GPU or use backend 'cpu'");
  }
  if (!(options.neg_inf < 0.0f) || !std::isfinite(options.neg_inf)) {
    throw UserError("maximum_path: neg_inf must be a finite negative number, got " +
                    std::to_string(options.neg_inf));
  }
}

void check_mas_lengths(const int64_t* text_lengths, const int64_t* mel_lengths, int64_t batch,
                       int64_t max_text, int64_t max_mel) {
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t t = text_lengths[b], s = mel_lengths[b];
    std::string what;
    if (t < 1 || s < 1) {
      what = "lengths must be at least 1";
    } else if (t > max_text || s > max_mel) {
      what = "lengths exceed logp's shape [" + std::to_string(max_text) + ", " +
             std::to_string(max_mel) + "]";
    } else if (t > s) {
      what = "more text tokens than mel frames: no monotonic alignment exists";
    }
    if (!what.empty()) {
      throw UserError("maximum_path: item " + std::to_string(b) + " has text length " +
                      std::to_string(t) + " and mel length " + std::to_string(s) + ": " + what);
    }
  }
}

std::string nonfinite_message(int64_t item) {
  return "maximum_path: logp of item " + std::to_string(item) +
         " holds a non-finite value (inf or nan) inside its alignment band; check the model's "
         "outputs or mask padding before alignment";
}

}  // namespace monoflow::align
