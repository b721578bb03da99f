// The states of every random generator a training step draws from: the CPU default generator
// (dropout and noise on CPU, initialisation) and each CUDA device's default generator.
// Saved in checkpoints so that a resumed run draws the same numbers as an uninterrupted one.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace monoflow::train {

struct RngState {
  torch::Tensor cpu;                // uint8 state blob of the CPU generator
  std::vector<torch::Tensor> cuda;  // one per visible CUDA device (empty without CUDA)
};

RngState capture_rng();
// Restores the CPU state and as many CUDA states as both the saved run and this machine have.
void restore_rng(const RngState& state);

// Saves the generators on construction and restores them on destruction, so that a piece of
// work (validation, synthesis) does not change what training draws next.
class RngGuard {
 public:
  RngGuard() : saved_(capture_rng()) {}
  ~RngGuard() { restore_rng(saved_); }
  RngGuard(const RngGuard&) = delete;
  RngGuard& operator=(const RngGuard&) = delete;

 private:
  RngState saved_;
};

}  // namespace monoflow::train
