#include "train/wav.h"

#include <cstdint>
#include <vector>

#include "data/audio.h"

namespace monoflow::train {

std::string encode_wav16(const torch::Tensor& samples, int sample_rate) {
  TORCH_CHECK(samples.dim() == 1, "encode_wav16 takes 1-D samples, got ", samples.sizes());
  const torch::Tensor pcm = (samples.detach().to(torch::kCPU, torch::kFloat32).clamp(-1.0, 1.0) *
                             32767.0)
                                .round()
                                .to(torch::kInt16)
                                .contiguous();
  const auto* p = pcm.data_ptr<int16_t>();
  return data::wav_pcm16_bytes(std::vector<int16_t>(p, p + pcm.numel()), sample_rate);
}

}  // namespace monoflow::train
