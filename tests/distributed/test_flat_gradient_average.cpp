// FlatGradientAverage (src/train/distributed/flat_gradient_average.h) over Gloo, two ranks as
// threads: the averaged flat buffer equals the mean of the ranks' own buffers bit for bit,
// every bucket but the head's starts during backward, and a parameter without a gradient
// averages as zeros.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "gloo_ranks.h"
#include "train/distributed/flat_gradient_average.h"

namespace monoflow::train {
namespace {

constexpr int64_t kHead = 4;

// A chain of linear layers (backward reaches the last one first) whose gradients are views
// of one flat buffer [head | parameters in order], as the graphed step lays them out.
struct FlatModel {
  torch::nn::Sequential net{torch::nn::Linear(6, 16), torch::nn::Tanh(), torch::nn::Linear(16, 16),
                            torch::nn::Tanh(), torch::nn::Linear(16, 16), torch::nn::Tanh(),
                            torch::nn::Linear(16, 3)};
  torch::nn::Linear unused{4, 4};  // never in the forward: no gradient
  std::vector<torch::Tensor> params, grads;
  torch::Tensor flat;

  // Weights and inputs from formulas, not the global generator, which the ranks' threads share.
  FlatModel() {
    params = net->parameters();
    for (auto& p : unused->parameters()) params.push_back(p);
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < params.size(); ++k) {
      params[k].copy_(torch::sin(torch::arange(params[k].numel()) * 0.37 + k).view_as(params[k]) * 0.5);
    }
    int64_t numel = kHead;
    for (auto& p : params) numel += p.numel();
    flat = torch::zeros({numel});
    int64_t offset = kHead;
    for (auto& p : params) {
      grads.push_back(flat.narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
  }

  std::vector<torch::Tensor> backward(int rank) {
    const torch::Tensor x = torch::cos(torch::arange(30) * (0.3 + 0.2 * rank)).view({5, 6});
    const torch::Tensor loss = net->forward(x).pow(2).sum();
    return torch::autograd::grad({loss}, params, {}, false, false, /*allow_unused=*/true);
  }

  void write_head(int rank) { flat.narrow(0, 0, 3).copy_(torch::tensor({1.0f + rank, 0.5f * rank, -2.0f})); }
};

// Each rank's own flat buffer, without any averaging.
torch::Tensor local_flat(int rank) {
  FlatModel m;
  copy_gradients(m.grads, m.backward(rank));
  m.write_head(rank);
  return m.flat.clone();
}

TEST(FlatGradientAverage, EqualsTheMeanOfTheRanksAndOverlapsAllButTheHeadsBucket) {
  if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo headers";
  const torch::Tensor mean = (local_flat(0) + local_flat(1)) / 2;
  std::vector<torch::Tensor> averaged(2);
  std::vector<int> buckets(2), overlapped(2);
  testing::run_gloo_ranks(2, [&](int rank, Distributed& group) {
    FlatModel m;
    // Small buckets: a few layers each; 64 bytes for the head's bucket.
    FlatGradientAverage average(group, m.params, m.grads, m.flat, kHead, /*bucket_bytes=*/600,
                                /*first_bucket_bytes=*/64);
    for (int round = 0; round < 2; ++round) {  // arm() resets: a second step is the same
      m.flat.narrow(0, kHead, m.flat.numel() - kHead).fill_(7);  // every gradient value is written
      average.arm();
      average.finish_backward(m.backward(rank));
      m.write_head(rank);
      average.average();
    }
    averaged[rank] = m.flat.clone();
    buckets[rank] = average.buckets();
    overlapped[rank] = average.overlapped();
  });
  if (HasFatalFailure()) return;
  EXPECT_TRUE(torch::equal(averaged[0], mean));
  EXPECT_TRUE(torch::equal(averaged[1], mean));
  EXPECT_GE(buckets[0], 4);
  // The unused layer is last: its bucket (the top one) waits for finish_backward, and so,
  // in order, does every bucket below it.
  EXPECT_EQ(overlapped[0], 0);
  EXPECT_EQ(mean.narrow(0, mean.numel() - 20, 20).abs().max().item<float>(), 0.0f);
}

TEST(FlatGradientAverage, BucketsStartInOrderAsBackwardFillsThem) {
  if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo headers";
  std::vector<int> buckets(2), overlapped(2);
  std::vector<torch::Tensor> averaged(2), own(2);
  testing::run_gloo_ranks(2, [&](int rank, Distributed& group) {
    FlatModel m;
    m.params.resize(m.params.size() - 2);  // without the unused layer
    m.grads.resize(m.grads.size() - 2);
    m.flat = m.flat.narrow(0, 0, m.flat.numel() - 20);
    FlatGradientAverage average(group, m.params, m.grads, m.flat, kHead, 600, 64);
    average.arm();
    const std::vector<torch::Tensor> produced = m.backward(rank);
    own[rank] = torch::cat({produced[0].reshape(-1), produced.back().reshape(-1)});
    average.finish_backward(produced);
    m.write_head(rank);
    average.average();
    averaged[rank] = m.flat.clone();
    buckets[rank] = average.buckets();
    overlapped[rank] = average.overlapped();
    EXPECT_EQ(average.bucket_begin(0), 0u);
  });
  if (HasFatalFailure()) return;
  EXPECT_GE(buckets[0], 4);
  EXPECT_EQ(overlapped[0], buckets[0] - 1);  // all but bucket 0 started from the hooks
  EXPECT_EQ(overlapped[1], buckets[1] - 1);
  EXPECT_TRUE(torch::equal(averaged[0], averaged[1]));
  // The first and last parameters' gradients arrived averaged.
  const int64_t first = 16 * 6, last_bias = 3;
  EXPECT_TRUE(torch::equal(averaged[0].narrow(0, kHead, first), ((own[0] + own[1]) / 2).narrow(0, 0, first)));
  EXPECT_TRUE(torch::equal(averaged[0].narrow(0, averaged[0].numel() - last_bias, last_bias),
                           ((own[0] + own[1]) / 2).narrow(0, first, last_bias)));
}

TEST(FlatGradientAverage, RejectsGradientsThatAreNotTheFlatBuffersViews) {
  Distributed single({}, torch::kCPU);
  FlatModel m;
  std::vector<torch::Tensor> copies;
  for (auto& g : m.grads) copies.push_back(g.clone());
  EXPECT_THROW(FlatGradientAverage(single, m.params, copies, m.flat, kHead), c10::Error);
  EXPECT_THROW(FlatGradientAverage(single, m.params, m.grads, m.flat, kHead + 1), c10::Error);
  EXPECT_NO_THROW(FlatGradientAverage(single, m.params, m.grads, m.flat, kHead));
}

}  // namespace
}  // namespace monoflow::train
