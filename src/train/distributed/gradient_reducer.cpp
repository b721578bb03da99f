#include "train/distributed/gradient_reducer.h"

namespace monoflow::train {

GradientReducer::GradientReducer(Distributed& dist, const std::vector<torch::Tensor>& parameters,
                                 int64_t bucket_bytes)
    : dist_(dist) {
  for (const auto& p : parameters) {
    if (p.requires_grad()) params_.push_back(p);
  }
  bucket_of_.resize(params_.size());
  offset_of_.resize(params_.size());
  contributions_.assign(params_.size(), 0);
  // Reverse order; a new bucket where the size limit or the dtype says so.
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const auto& p = params_[k];
    if (groups.empty() || bytes + static_cast<int64_t>(p.nbytes()) > bucket_bytes ||
        p.scalar_type() != params_[groups.back().front()].scalar_type()) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += static_cast<int64_t>(p.nbytes());
  }
  for (auto& group : groups) {
    Bucket b;
    int64_t numel = 0;
    for (const size_t k : group) {
      bucket_of_[k] = buckets_.size();
      offset_of_[k] = numel;
      numel += params_[k].numel();
    }
    b.params = std::move(group);
    b.flat = torch::zeros({numel}, params_[b.params.front()].options().requires_grad(false));
    buckets_.push_back(std::move(b));
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(params_[k].register_hook([this, k](const torch::Tensor& grad) { on_gradient(k, grad); }));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

torch::Tensor GradientReducer::slice(size_t param) {
  return buckets_[bucket_of_[param]].flat.narrow(0, offset_of_[param], params_[param].numel());
}

void GradientReducer::prepare() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : buckets_) b.ready = 0, b.redo = false, b.wait = nullptr;
  std::fill(contributions_.begin(), contributions_.end(), 0);
  next_ = 0;
  overlapped_ = 0;
  armed_ = true;
}

void GradientReducer::on_gradient(size_t param, const torch::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_) return;
  Bucket& bucket = buckets_[bucket_of_[param]];
  if (++contributions_[param] > 1) {  // shared parameter: its .grad is the sum, known at the end
    bucket.redo = true;
    return;
  }
  torch::NoGradGuard no_grad;
  slice(param).copy_(grad.reshape(-1));
  if (++bucket.ready == bucket.params.size()) start_ready_buckets();
}

void GradientReducer::start_ready_buckets() {
  while (next_ < buckets_.size() && buckets_[next_].ready == buckets_[next_].params.size()) {
    Bucket& b = buckets_[next_++];
    b.wait = dist_.start_sum(b.flat);
    ++overlapped_;
  }
}

void GradientReducer::fill_from_grads(Bucket& bucket) {
  for (const size_t k : bucket.params) {
    const auto& g = params_[k].grad();
    if (g.defined()) slice(k).copy_(g.reshape(-1));
    else slice(k).zero_();
  }
}

void GradientReducer::finish() {
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
  // Buckets with a parameter that got no gradient never started: now, still in order.
  for (size_t i = next_; i < buckets_.size(); ++i) {
    fill_from_grads(buckets_[i]);
    buckets_[i].wait = dist_.start_sum(buckets_[i].flat);
  }
  next_ = buckets_.size();
  for (auto& b : buckets_) b.wait();
  for (auto& b : buckets_) {  // every rank has the same shared parameters, so the same redo list
    if (!b.redo) continue;
    fill_from_grads(b);
    dist_.start_sum(b.flat)();
  }
  const double world = dist_.world_size();
  for (auto& b : buckets_) {
    b.flat.div_(world);
    for (const size_t k : b.params) {
      auto g = params_[k].grad();
      if (g.defined()) g.copy_(slice(k).view_as(g));
    }
  }
}

}  // namespace monoflow::train
