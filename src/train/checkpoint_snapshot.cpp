#include "train/checkpoint_snapshot.h"

#include <torch/cuda.h>

#include <memory>
#include <unordered_map>

namespace monoflow::train {
namespace {

// Copies device tensors into pinned host memory without waiting (one wait at the end for them
// all); host tensors are cloned.
class HostCopier {
 public:
  torch::Tensor operator()(const torch::Tensor& t) {
    if (!t.defined()) return t;
    torch::Tensor host;
    if (t.is_cuda()) {
      host = torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
      host.copy_(t, /*non_blocking=*/true);
      device_ = t.device().index();
    } else {
      host = t.clone();
    }
    host.set_requires_grad(t.requires_grad());
    return host;
  }
  // The copies are complete once this returns.
  void finish() const {
    if (device_ >= 0) torch::cuda::synchronize(device_);
  }

 private:
  int device_ = -1;
};

}  // namespace

CheckpointContents checkpoint_snapshot(const torch::nn::Module& model, const torch::optim::Adam& optimizer,
                                       const CheckpointState& state) {
  torch::NoGradGuard no_grad;
  CheckpointContents c = checkpoint_contents(model, optimizer, state);
  HostCopier copy;
  for (auto& [name, t] : c.parameters) t = copy(t);
  for (auto& [name, t] : c.buffers) t = copy(t);

  // A host Adam with the same groups and options over host copies of the parameters, holding
  // host copies of the moments: Adam::save writes the state by parameter, so it writes what
  // `optimizer` would.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::unordered_map<const void*, torch::Tensor> host_param;
  for (const auto& g : optimizer.param_groups()) {
    std::vector<torch::Tensor> params;
    for (const auto& p : g.params()) {
      params.push_back(copy(p));
      host_param[p.unsafeGetTensorImpl()] = params.back();
    }
    groups.emplace_back(params, g.options().clone());
  }
  auto host = std::make_shared<torch::optim::Adam>(groups, static_cast<const torch::optim::AdamOptions&>(optimizer.defaults()));
  for (const auto& [key, state_ptr] : optimizer.state()) {
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*state_ptr);
    auto h = std::make_unique<torch::optim::AdamParamState>();
    h->step(s.step());
    h->exp_avg(copy(s.exp_avg()));
    h->exp_avg_sq(copy(s.exp_avg_sq()));
    h->max_exp_avg_sq(copy(s.max_exp_avg_sq()));
    host->state()[host_param.at(key).unsafeGetTensorImpl()] = std::move(h);
  }
  copy.finish();
  c.write_optimizer = [host](torch::serialize::OutputArchive& a) { host->save(a); };
  return c;
}

}  // namespace monoflow::train
