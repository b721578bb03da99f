// Numeric precision switches of a training step: TF32 matmuls/convolutions on the GPU and
// bf16 autocast (the official fp16_run switch, in bf16 here: no loss scaling needed).
#pragma once

#include <torch/torch.h>

namespace monoflow::train {

void set_allow_tf32(bool allow);

// bf16 autocast for CUDA ops while alive (no-op when `enabled` is false or on the CPU).
class Bf16Autocast {
 public:
  Bf16Autocast(bool enabled, const torch::Device& device);
  ~Bf16Autocast();
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool active_ = false;
  bool was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kHalf;
};

}  // namespace monoflow::train
