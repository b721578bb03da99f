#include "train/synth/wav.h"

#include <cstdint>

namespace monoflow::train {
namespace {

void put(std::string& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

std::string encode_wav16(const torch::Tensor& samples, int sample_rate) {
  TORCH_CHECK(samples.dim() == 1, "encode_wav16 takes 1-D samples, got ", samples.sizes());
  const torch::Tensor pcm = (samples.detach().to(torch::kCPU, torch::kFloat32).clamp(-1.0, 1.0) *
                             32767.0)
                                .round()
                                .to(torch::kInt16)
                                .contiguous();
  const uint32_t data_bytes = static_cast<uint32_t>(pcm.numel() * 2);
  std::string out = "RIFF";
  put(out, 36 + data_bytes, 4);
  out += "WAVEfmt ";
  put(out, 16, 4);                        // fmt chunk size
  put(out, 1, 2);                         // PCM
  put(out, 1, 2);                         // mono
  put(out, sample_rate, 4);
  put(out, sample_rate * 2, 4);           // byte rate
  put(out, 2, 2);                         // block align
  put(out, 16, 2);                        // bits per sample
  out += "data";
  put(out, data_bytes, 4);
  const auto* p = pcm.data_ptr<int16_t>();
  for (int64_t i = 0; i < pcm.numel(); ++i) put(out, static_cast<uint16_t>(p[i]), 2);
  return out;
}

}  // namespace monoflow::train
