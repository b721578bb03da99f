// Adam with the multi-tensor fused kernel (at::_fused_adam_): one launch group per step for
// all parameters instead of ~10 small kernels per parameter as torch::optim::Adam issues.
// Same hyper-parameters, the same update rule (bias-corrected moments, eps added to the
// corrected square root), and the same state objects: moments and step counts live in
// torch::optim::AdamParamState, so save()/load() and checkpoints are those of
// torch::optim::Adam. Per-parameter step counters are kept as device tensors for the kernel
// and rebuilt from the state whenever it was replaced (load) or created.
//
// Two ways to step:
//   step()                          the learning rate of the param group (host), as any optimizer;
//   step_on_device(lr, found_inf)   learning rate and skip decision as device scalars, nothing
//                                   read back: what a graph-captured training step records.
// On a GPU both read the learning rate as a float32 device scalar (the kernel's tensor form),
// so the eager and the captured step make bit-identical updates.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <unordered_map>

namespace monoflow::train {

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(const std::vector<torch::Tensor>& params, const torch::optim::AdamOptions& options)
      : torch::optim::Adam(params, options) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

  // One update of every parameter with a gradient, lr and found_inf being float32 scalars on
  // the parameters' device. Where found_inf is 1 the update is skipped inside the kernel and
  // the step counts stay (as torch's GradScaler skips); 0 updates. Needs init_state() first.
  // The host's step counts fall behind: sync_steps_from_device() before saving.
  void step_on_device(const torch::Tensor& lr, const torch::Tensor& found_inf);

  // Creates the moments and step counter of every parameter now, so that a captured step
  // finds them allocated (zero moments, as the first step() would make them).
  void init_state();

  // Reads the device step counters back into the AdamParamState step counts (one wait for
  // the GPU). A no-op unless step_on_device ran since the last call.
  void sync_steps_from_device();

  // Moves the parameters, their moments and one shared step count into flat buffers laid out
  // as `gradients` holds the gradients (every p.grad() a view of it, one after another in the
  // group's order), so that each update is one fused kernel over three long buffers instead of
  // a multi-tensor launch over every parameter (the graphed step's Adam, docs/benchmarks.md).
  // The parameters stay the same tensors (their data becomes views of the flat buffer), save()
  // writes what it wrote before, and on a GPU the updates are the same numbers bit for bit (on
  // the CPU, where the kernel's vector body and scalar tail fall changes, within an ulp).
  // Returns false and changes nothing unless there is one group, every parameter with a gradient
  // is float32 and laid out so, and all step counts are equal. load() undoes it, and so does a
  // step() that finds a gradient no longer its view: from then on it updates per parameter.
  bool flatten(const torch::Tensor& gradients);
  bool flat() const { return flat_.has_value(); }

  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  struct FlatBuffers {
    torch::Tensor params, grads, exp_avg, exp_avg_sq, max_exp_avg_sq, step;
    std::vector<torch::Tensor> members;  // the parameters laid out in them, in order
  };
  // One kernel over the flat buffers; lr undefined: the group's rate as a host number.
  void flat_update(const torch::Tensor& lr, const torch::Tensor& found_inf);
  // The group's rate as a float32 scalar on `like`'s device (reused: lr_), undefined on the CPU.
  torch::Tensor device_lr(const torch::Tensor& like, double value);
  // Whether every parameter's gradient is still its view of flat_->grads.
  bool gradients_are_flat() const;
  std::optional<FlatBuffers> flat_;

  struct StepCounter {
    torch::Tensor value;   // float32 scalar on the parameter's device
    int64_t mirror = -1;   // the AdamParamState step it holds
    const void* state = nullptr;  // which state object it mirrors
  };
  // The state (max_exp_avg_sq too with amsgrad) and counter of p, created or rebuilt as needed.
  std::pair<torch::optim::AdamParamState*, StepCounter*> state_of(const torch::Tensor& p, bool amsgrad);
  void fused_update(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& steps,
                    const torch::optim::AdamOptions& options, const torch::Tensor& lr,
                    const torch::Tensor& found_inf);

  std::unordered_map<const void*, StepCounter> counters_;
  torch::Tensor lr_;            // step() on a GPU: the group's learning rate as a device scalar
  bool device_ahead_ = false;   // step_on_device ran: host step counts are stale
};

}  // namespace monoflow::train
