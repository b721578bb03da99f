#include "train/fused_adam.h"

namespace monoflow::train {

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "FusedAdam does not support sparse gradients");
      void* key = p.unsafeGetTensorImpl();
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->step(0);
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (o.amsgrad()) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state_.emplace(key, std::move(s)).first;
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
      StepCounter& c = counters_[key];
      if (!c.value.defined() || c.state != &s || c.mirror != s.step()) {
        // New or reloaded state: (re)build the device counter from the saved integer.
        c.value = torch::full({}, static_cast<double>(s.step()), p.options().dtype(torch::kFloat32));
        c.state = &s;
        c.mirror = s.step();
      }
      s.step(s.step() + 1);
      c.mirror = s.step();
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      if (o.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
      steps.push_back(c.value);
    }
    if (params.empty()) continue;
    at::_foreach_add_(steps, 1.0);
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr(), std::get<0>(o.betas()),
                     std::get<1>(o.betas()), o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
  }
  return loss;
}

}  // namespace monoflow::train
