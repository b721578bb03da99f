#include "train/fused_adam.h"

namespace monoflow::train {

std::pair<torch::optim::AdamParamState*, FusedAdam::StepCounter*> FusedAdam::state_of(const torch::Tensor& p,
                                                                                       bool amsgrad) {
  void* key = p.unsafeGetTensorImpl();
  auto it = state_.find(key);
  if (it == state_.end()) {
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(0);
    s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    it = state_.emplace(key, std::move(s)).first;
  }
  auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
  if (amsgrad && !s.max_exp_avg_sq().defined()) s.max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
  StepCounter& c = counters_[key];
  if (!c.value.defined() || c.state != &s || c.mirror != s.step()) {
    // New or reloaded state: (re)build the device counter from the saved integer.
    c.value = torch::full({}, static_cast<double>(s.step()), p.options().dtype(torch::kFloat32));
    c.state = &s;
    c.mirror = s.step();
  }
  return {&s, &c};
}

void FusedAdam::fused_update(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& steps,
                             const torch::optim::AdamOptions& o, const torch::Tensor& lr,
                             const torch::Tensor& found_inf) {
  std::vector<torch::Tensor> grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  for (const auto& p : params) {
    auto& s = static_cast<torch::optim::AdamParamState&>(*state_.at(p.unsafeGetTensorImpl()));
    grads.push_back(p.grad());
    exp_avgs.push_back(s.exp_avg());
    exp_avg_sqs.push_back(s.exp_avg_sq());
    if (o.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
  }
  const auto [beta1, beta2] = o.betas();
  if (lr.defined()) {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2,
                     o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, /*grad_scale=*/std::nullopt,
                     found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt);
  } else {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr(), beta1, beta2,
                     o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
  }
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  sync_steps_from_device();
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::vector<torch::Tensor> params, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "FusedAdam does not support sparse gradients");
      auto [s, c] = state_of(p, o.amsgrad());
      s->step(s->step() + 1);
      c->mirror = s->step();
      params.push_back(p);
      steps.push_back(c->value);
    }
    if (params.empty()) continue;
    at::_foreach_add_(steps, 1.0);
    torch::Tensor lr;
    if (params.front().is_cuda()) {
      if (!lr_.defined() || lr_.device() != params.front().device()) {
        lr_ = torch::empty({}, params.front().options().dtype(torch::kFloat32));
      }
      lr = lr_.fill_(o.lr());
    }
    fused_update(params, steps, o, lr, {});
  }
  return loss;
}

void FusedAdam::init_state() {
  torch::NoGradGuard no_grad;
  sync_steps_from_device();
  for (auto& group : param_groups_) {
    const bool amsgrad = static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad();
    for (auto& p : group.params()) state_of(p, amsgrad);
  }
}

void FusedAdam::step_on_device(const torch::Tensor& lr, const torch::Tensor& found_inf) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(lr.defined() && found_inf.defined() && lr.scalar_type() == torch::kFloat32 &&
                  found_inf.scalar_type() == torch::kFloat32,
              "FusedAdam::step_on_device: lr and found_inf must be float32 device scalars");
  const auto not_inf = 1 - found_inf;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::vector<torch::Tensor> params, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      void* key = p.unsafeGetTensorImpl();
      TORCH_CHECK(state_.count(key) && counters_.count(key), "FusedAdam::step_on_device: call init_state() first");
      params.push_back(p);
      steps.push_back(counters_.at(key).value);
    }
    if (params.empty()) continue;
    at::_foreach_add_(steps, not_inf);  // a skipped update does not count as a step
    fused_update(params, steps, o, lr, found_inf);
  }
  device_ahead_ = true;
}

void FusedAdam::sync_steps_from_device() {
  if (!device_ahead_) return;
  device_ahead_ = false;
  std::vector<std::pair<torch::optim::AdamParamState*, StepCounter*>> live;
  std::vector<torch::Tensor> values;
  for (auto& [key, c] : counters_) {
    auto it = state_.find(const_cast<void*>(key));
    if (it == state_.end() || c.state != it->second.get()) continue;
    live.emplace_back(static_cast<torch::optim::AdamParamState*>(it->second.get()), &c);
    values.push_back(c.value);
  }
  if (values.empty()) return;
  const torch::Tensor host = torch::stack(values).to(torch::kCPU, torch::kDouble);  // one wait
  const double* counts = host.data_ptr<double>();
  for (size_t i = 0; i < live.size(); ++i) {
    live[i].first->step(static_cast<int64_t>(counts[i]));
    live[i].second->mirror = live[i].first->step();
  }
}

void FusedAdam::save(torch::serialize::OutputArchive& archive) const {
  TORCH_CHECK(!device_ahead_, "FusedAdam::save: call sync_steps_from_device() first (device steps ran)");
  torch::optim::Adam::save(archive);
}

}  // namespace monoflow::train
