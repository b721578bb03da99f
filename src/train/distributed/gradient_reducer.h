// Gradient averaging overlapped with the backward pass, as PyTorch's DistributedDataParallel
// does it. The parameters form buckets of about 25 MB in reverse order of registration
// (roughly the order in which backward produces their gradients). A hook on each parameter
// copies its gradient into its bucket's flat buffer; a full bucket starts its all-reduce at
// once, while backward goes on, always in bucket order so that every rank issues the same
// sequence of collectives. finish() waits for them and writes the means into .grad: the same
// values, bit for bit, as Distributed::average_gradients after backward.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <mutex>
#include <vector>

#include "train/distributed/distributed.h"

namespace monoflow::train {

class GradientReducer {
 public:
  GradientReducer(Distributed& dist, const std::vector<torch::Tensor>& parameters,
                  int64_t bucket_bytes = 25 << 20);
  ~GradientReducer();  // removes the hooks
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void prepare();  // before backward: arms the hooks
  void finish();   // after backward: every defined .grad holds its mean over ranks

  int buckets() const { return static_cast<int>(buckets_.size()); }
  // Buckets whose all-reduce started during the last backward (the rest ran in finish()).
  int overlapped() const { return overlapped_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    torch::Tensor flat;
    size_t ready = 0;  // parameters whose gradient is in `flat`
    bool redo = false;  // a parameter got two gradient contributions: reduce again from .grad
    std::function<void()> wait;
  };
  void on_gradient(size_t param, const torch::Tensor& grad);
  void start_ready_buckets();
  void fill_from_grads(Bucket& bucket);
  torch::Tensor slice(size_t param);

  Distributed& dist_;
  std::vector<torch::Tensor> params_;
  std::vector<unsigned> hooks_;
  std::vector<size_t> bucket_of_;
  std::vector<int64_t> offset_of_;
  std::vector<int> contributions_;
  std::vector<Bucket> buckets_;
  size_t next_ = 0;  // the next bucket to start
  bool armed_ = false;
  int overlapped_ = 0;
  std::mutex mutex_;  // hooks run on the autograd engine's threads
};

}  // namespace monoflow::train
