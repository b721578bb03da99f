// Adam with the multi-tensor fused kernel (at::_fused_adam_): one launch group per step for
// all parameters instead of ~10 small kernels per parameter as torch::optim::Adam issues.
// Same hyper-parameters, the same update rule (bias-corrected moments, eps added to the
// corrected square root), and the same state objects: moments and step counts live in
// torch::optim::AdamParamState, so save()/load() and checkpoints are those of
// torch::optim::Adam. Per-parameter step counters are kept as device tensors for the kernel
// and rebuilt from the state whenever it was replaced (load) or created.
#pragma once

#include <torch/torch.h>

#include <unordered_map>

namespace monoflow::train {

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(const std::vector<torch::Tensor>& params, const torch::optim::AdamOptions& options)
      : torch::optim::Adam(params, options) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  struct StepCounter {
    torch::Tensor value;   // float32 scalar on the parameter's device
    int64_t mirror = -1;   // the AdamParamState step it holds
    const void* state = nullptr;  // which state object it mirrors
  };
  std::unordered_map<const void*, StepCounter> counters_;
};

}  // namespace monoflow::train
