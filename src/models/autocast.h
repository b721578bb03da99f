// bf16 autocast as a scope: the official trainer's fp16_run switch, in bf16 here (no loss
// scaling needed). In models/ so that the model's tests and the training step share one guard.
#pragma once

#include <torch/torch.h>

namespace monoflow::models {

// bf16 autocast for CUDA ops while alive (no-op when `enabled` is false or `device` is not a
// GPU); the previous autocast state and dtype restored, the cast cache cleared with the
// outermost scope.
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

}  // namespace monoflow::models
