#include "train/fused_adam.h"

#include <algorithm>

namespace monoflow::train {
namespace {

// One _fused_adam_ launch group. lr: a float32 scalar on the parameters' device, or undefined
// for the group's own rate as a host number (the CPU).
void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList steps, const torch::optim::AdamOptions& o,
                const torch::Tensor& lr, const torch::Tensor& found_inf) {
  const auto [beta1, beta2] = o.betas();
  const auto inf = found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  if (lr.defined()) {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, o.weight_decay(),
                     o.eps(), o.amsgrad(), /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
  } else {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr(), beta1, beta2,
                     o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
  }
}

}  // namespace

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
  fused_adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o, lr, found_inf);
}

torch::Tensor FusedAdam::device_lr(const torch::Tensor& like, double value) {
  if (!like.is_cuda()) return {};
  if (!lr_.defined() || lr_.device() != like.device()) lr_ = torch::empty({}, like.options().dtype(torch::kFloat32));
  return lr_.fill_(value);
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  sync_steps_from_device();
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  if (flat_ && !gradients_are_flat()) flat_.reset();  // a gradient was replaced: per parameter from now
  if (flat_) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(param_groups_.front().options());
    for (const auto& p : flat_->members) {
      auto& s = static_cast<torch::optim::AdamParamState&>(*state_.at(p.unsafeGetTensorImpl()));
      s.step(s.step() + 1);
    }
    flat_->step.add_(1);
    flat_update(device_lr(flat_->params, o.lr()), {});
    return loss;
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
    fused_update(params, steps, o, device_lr(params.front(), o.lr()), {});
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
  device_ahead_ = true;
  if (flat_) {
    flat_->step.add_(not_inf);  // a skipped update does not count as a step
    flat_update(lr, found_inf);
    return;
  }
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
}

void FusedAdam::sync_steps_from_device() {
  if (!device_ahead_) return;
  device_ahead_ = false;
  if (flat_) {
    const auto step = static_cast<int64_t>(flat_->step.item<double>());  // one wait
    for (const auto& p : flat_->members) {
      static_cast<torch::optim::AdamParamState&>(*state_.at(p.unsafeGetTensorImpl())).step(step);
    }
    return;
  }
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
  if (!flat_) {
    torch::optim::Adam::save(archive);
    return;
  }
  // The moments are views of the flat buffers, and the archive writes a tensor's whole storage:
  // an Adam over the same parameters holding compact copies writes what an unflattened one would.
  torch::NoGradGuard no_grad;
  torch::optim::Adam copy(param_groups_, static_cast<const torch::optim::AdamOptions&>(defaults()));
  for (const auto& [key, state] : state_) {
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*state);
    auto c = std::make_unique<torch::optim::AdamParamState>();
    c->step(s.step());
    c->exp_avg(s.exp_avg().clone());
    c->exp_avg_sq(s.exp_avg_sq().clone());
    if (s.max_exp_avg_sq().defined()) c->max_exp_avg_sq(s.max_exp_avg_sq().clone());
    copy.state()[key] = std::move(c);
  }
  copy.save(archive);
}

void FusedAdam::load(torch::serialize::InputArchive& archive) {
  // Loading replaces the state objects, so the flat buffers no longer hold the moments. The
  // parameters stay views of flat_->params, which their storage keeps alive.
  sync_steps_from_device();
  flat_.reset();
  torch::optim::Adam::load(archive);
}

bool FusedAdam::flatten(const torch::Tensor& gradients) {
  torch::NoGradGuard no_grad;
  sync_steps_from_device();
  if (param_groups_.size() != 1 || !gradients.defined() || gradients.dim() != 1 || !gradients.is_contiguous() ||
      gradients.scalar_type() != torch::kFloat32) {
    return false;
  }
  const bool amsgrad = static_cast<const torch::optim::AdamOptions&>(param_groups_.front().options()).amsgrad();
  // The parameters in the order of their gradients in `gradients`, which must tile it.
  std::vector<std::pair<int64_t, torch::Tensor>> by_offset;
  const auto* base = static_cast<const char*>(gradients.data_ptr());
  for (const auto& p : param_groups_.front().params()) {
    if (!p.grad().defined()) continue;
    const auto& g = p.grad();
    if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous() || !g.is_contiguous() ||
        g.device() != gradients.device() || !g.is_alias_of(gradients)) {
      return false;
    }
    by_offset.emplace_back((static_cast<const char*>(g.data_ptr()) - base) / static_cast<int64_t>(sizeof(float)), p);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<torch::Tensor> params;
  std::vector<torch::optim::AdamParamState*> states;
  int64_t offset = 0;
  for (const auto& [at, p] : by_offset) {
    if (at != offset) return false;  // a gap or an overlap
    auto* s = state_of(p, amsgrad).first;
    if (!states.empty() && s->step() != states.front()->step()) return false;
    params.push_back(p);
    states.push_back(s);
    offset += p.numel();
  }
  if (params.empty() || offset != gradients.numel()) return false;

  FlatBuffers f;
  f.grads = gradients;
  f.params = torch::empty_like(gradients);
  f.exp_avg = torch::empty_like(gradients);
  f.exp_avg_sq = torch::empty_like(gradients);
  if (amsgrad) f.max_exp_avg_sq = torch::empty_like(gradients);
  f.step = torch::full({}, static_cast<double>(states.front()->step()), gradients.options());
  offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    auto& p = params[i];
    auto& s = *states[i];
    const auto view = [&](const torch::Tensor& flat, const torch::Tensor& values) {
      torch::Tensor v = flat.narrow(0, offset, p.numel()).view_as(p);
      v.copy_(values);
      return v;
    };
    p.set_data(view(f.params, p));  // the same tensor (autograd, modules and state keys see it), new memory
    s.exp_avg(view(f.exp_avg, s.exp_avg()));
    s.exp_avg_sq(view(f.exp_avg_sq, s.exp_avg_sq()));
    if (amsgrad) s.max_exp_avg_sq(view(f.max_exp_avg_sq, s.max_exp_avg_sq()));
    offset += p.numel();
  }
  f.members = std::move(params);
  flat_ = std::move(f);
  return true;
}

bool FusedAdam::gradients_are_flat() const {
  return std::all_of(flat_->members.begin(), flat_->members.end(),
                     [&](const torch::Tensor& p) { return p.grad().defined() && p.grad().is_alias_of(flat_->grads); });
}

void FusedAdam::flat_update(const torch::Tensor& lr, const torch::Tensor& found_inf) {
  const auto& o = static_cast<const torch::optim::AdamOptions&>(param_groups_.front().options());
  const FlatBuffers& f = *flat_;
  const std::vector<torch::Tensor> max_sq = o.amsgrad() ? std::vector<torch::Tensor>{f.max_exp_avg_sq}
                                                        : std::vector<torch::Tensor>{};
  fused_adam({f.params}, {f.grads}, {f.exp_avg}, {f.exp_avg_sq}, max_sq, {f.step}, o, lr, found_inf);
}

}  // namespace monoflow::train
