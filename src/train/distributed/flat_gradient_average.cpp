#include "train/distributed/flat_gradient_average.h"

#include "common/error.h"

namespace monoflow::train {

void copy_gradients(const std::vector<torch::Tensor>& into, const std::vector<torch::Tensor>& from) {
  TORCH_CHECK(into.size() == from.size(), "copy_gradients: ", into.size(), " targets, ", from.size(), " sources");
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> dst, src;
  for (size_t i = 0; i < into.size(); ++i) {
    if (!from[i].defined()) {
      into[i].zero_();
    } else if (from[i].strides() == into[i].strides() && from[i].scalar_type() == into[i].scalar_type()) {
      dst.push_back(into[i]);
      src.push_back(from[i]);
    } else {
      into[i].copy_(from[i]);
    }
  }
  if (!dst.empty()) at::_foreach_copy_(dst, src);
}

FlatGradientAverage::FlatGradientAverage(Distributed& dist, std::vector<torch::Tensor> params,
                                         std::vector<torch::Tensor> grads, torch::Tensor flat, int64_t head,
                                         int64_t bucket_bytes, int64_t first_bucket_bytes)
    : dist_(dist), params_(std::move(params)), grads_(std::move(grads)), flat_(std::move(flat)) {
  TORCH_CHECK(params_.size() == grads_.size() && !params_.empty(), "FlatGradientAverage: one gradient per parameter");
  TORCH_CHECK(flat_.dim() == 1 && flat_.is_contiguous(), "FlatGradientAverage: flat must be a contiguous vector");
  const int64_t item = static_cast<int64_t>(flat_.element_size());
  int64_t offset = head;
  for (size_t k = 0; k < grads_.size(); ++k) {
    TORCH_CHECK(params_[k].requires_grad(), "FlatGradientAverage: parameter ", k, " does not require grad");
    const auto* at = static_cast<const char*>(flat_.data_ptr()) + offset * item;
    TORCH_CHECK(grads_[k].is_contiguous() && offset + grads_[k].numel() <= flat_.numel() && grads_[k].data_ptr() == at,
                "FlatGradientAverage: gradient ", k, " is not flat's view at ", offset);
    offset += grads_[k].numel();
  }
  TORCH_CHECK(offset == flat_.numel(), "FlatGradientAverage: flat holds ", flat_.numel(), " values, head and gradients ",
              offset);
  // Bucket edges at parameter boundaries, from the head up.
  int64_t begin_offset = 0, bytes = head * item;
  Bucket bucket;
  for (size_t k = 0; k < grads_.size(); ++k) {
    bytes += grads_[k].numel() * item;
    const int64_t limit = buckets_.empty() ? first_bucket_bytes : bucket_bytes;
    if (bytes >= limit || k + 1 == grads_.size()) {
      bucket.end = k + 1;
      const int64_t end_offset = begin_offset + bytes / item;
      bucket.range = flat_.narrow(0, begin_offset, end_offset - begin_offset);
      buckets_.push_back(bucket);
      bucket = Bucket{};
      bucket.begin = k + 1;
      begin_offset = end_offset;
      bytes = 0;
    }
  }
  bucket_of_.resize(grads_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t k = buckets_[b].begin; k < buckets_[b].end; ++k) bucket_of_[k] = b;
  }
  arrived_.resize(grads_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(params_[k].register_hook([this, k](const torch::Tensor& grad) { on_gradient(k, grad); }));
  }
}

FlatGradientAverage::~FlatGradientAverage() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

void FlatGradientAverage::arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : buckets_) b.arrived = 0, b.wait = nullptr;
  for (auto& g : arrived_) g = torch::Tensor();
  next_ = 0;
  armed_ = true;
}

void FlatGradientAverage::on_gradient(size_t param, const torch::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_) return;
  // One call per parameter and backward: autograd sums a shared parameter's contributions
  // before its hook runs.
  TORCH_CHECK(!arrived_[param].defined(), "FlatGradientAverage: parameter ", param, " got two gradients in one backward");
  arrived_[param] = grad;
  Bucket& bucket = buckets_[bucket_of_[param]];
  if (++bucket.arrived == bucket.end - bucket.begin) start_ready_buckets();
}

void FlatGradientAverage::start_ready_buckets() {
  // Bucket 0 waits for the head: average() starts it.
  while (next_ + 1 < buckets_.size()) {
    Bucket& b = buckets_[buckets_.size() - 1 - next_];
    if (b.arrived != b.end - b.begin) return;
    copy_in(b, arrived_);
    start(b);
  }
}

void FlatGradientAverage::copy_in(Bucket& bucket, const std::vector<torch::Tensor>& source) {
  const auto first = static_cast<std::ptrdiff_t>(bucket.begin), last = static_cast<std::ptrdiff_t>(bucket.end);
  copy_gradients({grads_.begin() + first, grads_.begin() + last}, {source.begin() + first, source.begin() + last});
  for (size_t k = bucket.begin; k < bucket.end; ++k) arrived_[k] = torch::Tensor();  // release
}

void FlatGradientAverage::start(Bucket& bucket) {
  bucket.wait = dist_.start_sum(bucket.range);
  ++next_;
}

void FlatGradientAverage::finish_backward(const std::vector<torch::Tensor>& produced) {
  TORCH_CHECK(produced.size() == grads_.size(), "FlatGradientAverage: ", produced.size(), " gradients for ",
              grads_.size(), " parameters");
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(armed_, "FlatGradientAverage: finish_backward without arm");
  armed_ = false;
  overlapped_ = static_cast<int>(next_);  // the hooks started the top next_ buckets
  for (size_t i = buckets_.size() - next_; i-- > 0;) {
    copy_in(buckets_[i], produced);
    if (i > 0) start(buckets_[i]);
  }
}

void FlatGradientAverage::average() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!armed_ && next_ + 1 == buckets_.size(), "FlatGradientAverage: average before finish_backward");
  start(buckets_.front());
  for (size_t i = buckets_.size(); i-- > 0;) buckets_[i].wait();
  torch::NoGradGuard no_grad;
  flat_.div_(dist_.world_size());
}

}  // namespace monoflow::train
