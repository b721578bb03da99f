// Averaging gradients that live in one flat buffer over the ranks, bucket by bucket, each
// bucket's all-reduce started while backward is still producing the rest: the graphed step's
// counterpart of GradientReducer (which keeps its own buckets and copies back into .grad).
//
// Here the gradients are already views of `flat`, laid out as [head | parameter 0 | 1 | ...].
// The head holds values the step writes only after backward (the skip flag and the losses,
// averaged with the gradients). The buckets are ranges of whole parameters; bucket 0 starts at
// the head and is `first_bucket_bytes` or a little more, the others about `bucket_bytes`. They
// start in descending order: backward produces the last-registered parameters' gradients first
// (the decoder's, then the encoder's), so the high buckets fill first, and bucket 0, which
// also waits for the head, is small, so little of the sum is left once backward ends.
//
// Every rank starts the same buckets in the same order: a bucket starts when all of its
// parameters' gradients have arrived and every bucket above it has started.
//
//   FlatGradientAverage average(dist, params, grads, flat, /*head=*/3);
//   average.arm();                      // before backward
//   produced = autograd::grad(...);     // parameter hooks copy full buckets in and start them
//   average.finish_backward(produced);  // the rest copied in; all but bucket 0 started
//   ... write the head ...
//   average.average();                  // bucket 0 started; all waited for; flat /= world size
//
// Under a CUDA graph capture each start and wait becomes an edge between the capture stream
// and NCCL's (Distributed::start_sum), so the replayed graph overlaps the sums with backward.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "train/distributed/distributed.h"

namespace monoflow::train {

// into[k] = from[k] (zeros where from[k] is undefined): one multi-tensor copy for the pairs of
// equal strides and dtype, which is all of them in practice, instead of a kernel per tensor.
void copy_gradients(const std::vector<torch::Tensor>& into, const std::vector<torch::Tensor>& from);

class FlatGradientAverage {
 public:
  // params: leaves that require grad (each gets a hook); grads[k]: parameter k's gradient, a
  // view of `flat` at `head` + the sizes of the parameters before it.
  FlatGradientAverage(Distributed& dist, std::vector<torch::Tensor> params, std::vector<torch::Tensor> grads,
                      torch::Tensor flat, int64_t head, int64_t bucket_bytes = 25 << 20,
                      int64_t first_bucket_bytes = 4 << 20);
  ~FlatGradientAverage();  // removes the hooks
  FlatGradientAverage(const FlatGradientAverage&) = delete;
  FlatGradientAverage& operator=(const FlatGradientAverage&) = delete;

  void arm();  // before backward: the hooks take gradients and start full buckets
  // After backward (`produced[k]`: parameter k's gradient, undefined for none, which counts as
  // zeros): copies in what the hooks did not, starts every bucket above 0.
  void finish_backward(const std::vector<torch::Tensor>& produced);
  // After the head is written: starts bucket 0, waits for every bucket, divides by the world size.
  void average();

  int buckets() const { return static_cast<int>(buckets_.size()); }
  // Buckets that started from a hook during the last backward (the others after it).
  int overlapped() const { return overlapped_; }
  // Bucket b's first parameter (bucket 0 also holds the head before it).
  size_t bucket_begin(int b) const { return buckets_[static_cast<size_t>(b)].begin; }

 private:
  struct Bucket {
    size_t begin = 0, end = 0;  // parameters [begin, end)
    torch::Tensor range;        // its part of `flat`
    size_t arrived = 0;
    std::function<void()> wait;
  };
  void on_gradient(size_t param, const torch::Tensor& grad);
  void start_ready_buckets();                        // from the top, while full
  void copy_in(Bucket& bucket, const std::vector<torch::Tensor>& source);
  void start(Bucket& bucket);

  Distributed& dist_;
  std::vector<torch::Tensor> params_, grads_;
  torch::Tensor flat_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<torch::Tensor> arrived_;  // gradients the hooks took, until their bucket starts
  std::vector<unsigned> hooks_;
  size_t next_ = 0;  // buckets started so far: the top next_ ones, started in order
  bool armed_ = false;
  int overlapped_ = 0;
  std::mutex mutex_;  // hooks run on the autograd engine's thread
};

}  // namespace monoflow::train
