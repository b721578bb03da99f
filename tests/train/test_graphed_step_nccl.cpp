// The graphed step with data parallelism over NCCL (src/train/graphed_step.h), two ranks as
// threads of this process on cuda:0 and cuda:1. Skipped without two GPUs or NCCL.
//   - Averaged inside the graph, bucket by bucket during backward, two halves of a batch give
//     the gradient of the whole batch, and both ranks end with the same weights, bit for bit.
//   - Ranks with batches of different lengths replay one shape (the longer one's bucket) and
//     log the same, averaged, losses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "../distributed/gloo_ranks.h"
#include "common/crash_report.h"
#include "models/glow_tts.h"
#include "small_model.h"
#include "train/bucket_lengths.h"
#include "train/distributed/distributed.h"
#include "train/fused_adam.h"
#include "train/graphed_step.h"
#include "train/precision.h"
#include "train/train_step.h"

namespace monoflow::train {
namespace {

bool have_two_gpus() {
  return torch::cuda::is_available() && torch::cuda::device_count() >= 2 && distributed_backend_available("nccl");
}

// Runs body(rank, group) on two threads, rank r on cuda:r with its own NCCL group.
template <class Body>
void run_nccl_ranks(Body body) {
  const int port = testing::free_port();
  std::vector<std::string> failures(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        DistributedOptions o;
        o.rank = rank;
        o.world_size = 2;
        o.master_port = port;
        o.backend = "nccl";
        Distributed group(o, torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank)));
        body(rank, group);
      } catch (const std::exception& e) {
        failures[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) ASSERT_EQ(failures[r], "") << "rank " << r;
}

// Every item of one text and mel length: each loss of the batch is then the mean of its
// halves' losses, so the ranks' averaged gradient is the whole batch's.
data::Batch equal_length_batch(int64_t items, int64_t tokens, int64_t frames) {
  data::Batch b;
  b.text = torch::randint(1, 148, {items, tokens}, torch::kInt64);
  b.text_lengths = torch::full({items}, tokens, torch::kInt64);
  b.mel = torch::randn({items, 80, frames}) - 5;
  b.mel_lengths = torch::full({items}, frames, torch::kInt64);
  return b;
}

data::Batch rows(const data::Batch& b, int64_t begin, int64_t end) {
  data::Batch s;
  s.text = b.text.slice(0, begin, end).contiguous();
  s.text_lengths = b.text_lengths.slice(0, begin, end).contiguous();
  s.mel = b.mel.slice(0, begin, end).contiguous();
  s.mel_lengths = b.mel_lengths.slice(0, begin, end).contiguous();
  return s;
}

// A model with `reference`'s weights on `device`, without dropout (eval: the ranks' masks
// would differ from the whole batch's) and without DDI.
models::GlowTTS copy_on(models::GlowTTS& reference, const torch::Device& device) {
  models::GlowTTS m(reference->options());
  torch::NoGradGuard no_grad;
  const auto src = reference->named_parameters();
  for (auto& p : m->named_parameters()) p.value().copy_(src[p.key()]);
  m->set_ddi(false);
  m->eval();
  m->to(device);
  return m;
}

torch::optim::AdamOptions adam() { return torch::optim::AdamOptions(1e-3).betas({0.9, 0.98}).eps(1e-9); }

class GraphedStepNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_two_gpus()) GTEST_SKIP() << "needs two GPUs and NCCL";
    install_crash_report("test_train");  // a crash inside NCCL or a capture says where
    set_allow_tf32(false);
    torch::manual_seed(7);
    reference = models::GlowTTS(testing::small_model_options());
    reference->set_ddi(false);
    reference->eval();
    options.mas.backend = align::Backend::kCudaFast;
  }
  models::GlowTTS reference{nullptr};
  StepOptions options;
};

TEST_F(GraphedStepNccl, TwoRanksAverageLikeOneStepOnTheConcatenatedBatch) {
  const data::Batch full = equal_length_batch(4, 16, 128);  // already on bucket multiples
  models::GlowTTS whole = copy_on(reference, torch::kCUDA);
  FusedAdam whole_opt(whole->parameters(), adam());
  const StepResult ref = train_step(whole, whole_opt, to_device(full, torch::kCUDA), 1e-3, options);
  ASSERT_TRUE(ref.finite);
  std::vector<torch::Tensor> ref_grads;
  for (const auto& p : whole->parameters()) ref_grads.push_back(p.grad().cpu());

  std::vector<std::vector<torch::Tensor>> grads(2), weights(2);
  std::vector<double> mle(2), norm(2);
  std::vector<int> buckets(2), in_backward(2);
  run_nccl_ranks([&](int rank, Distributed& group) {
    const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank));
    models::GlowTTS m = copy_on(reference, device);
    FusedAdam opt(m->parameters(), adam());
    StepOptions so = options;
    so.distributed = &group;
    GraphBuckets small_buckets;  // several gradient buckets in the small model
    small_buckets.gradient_bucket_bytes = 64 << 10;
    small_buckets.first_gradient_bucket_bytes = 16 << 10;
    GraphedTrainStep step(m, opt, so, small_buckets);
    const StepResult r = step.step(rows(full, 2 * rank, 2 * rank + 2), 1e-3, 1);
    buckets[rank] = step.gradient_buckets();
    in_backward[rank] = step.buckets_started_in_backward();
    mle[rank] = r.loss_mle.item<double>();
    norm[rank] = r.grad_norm.item<double>();
    for (const auto& p : m->parameters()) {
      grads[rank].push_back(p.grad().cpu());
      weights[rank].push_back(p.detach().cpu());
    }
    EXPECT_EQ(step.status().skipped, 0);
  });
  if (HasFatalFailure()) return;
  // The graph overlaps the all-reduces with backward: buckets started from the hooks.
  EXPECT_GE(buckets[0], 3);
  EXPECT_EQ(buckets[0], buckets[1]);
  EXPECT_EQ(in_backward[0], in_backward[1]);
  EXPECT_GE(in_backward[0], buckets[0] / 2) << "of " << buckets[0] << " buckets";
  // The mean of the halves' losses is the whole batch's; both ranks log it.
  EXPECT_EQ(mle[0], mle[1]);
  EXPECT_NEAR(mle[0], ref.loss_mle.item<double>(), 1e-5 * std::abs(ref.loss_mle.item<double>()));
  EXPECT_EQ(norm[0], norm[1]);
  EXPECT_NEAR(norm[0], ref.grad_norm.item<double>(), 1e-4 * ref.grad_norm.item<double>());
  ASSERT_EQ(grads[0].size(), ref_grads.size());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < ref_grads.size(); ++i) {
    ASSERT_TRUE(torch::equal(weights[0][i], weights[1][i])) << "parameter " << i << " differs between the ranks";
    worst = std::max(worst, (grads[0][i] - ref_grads[i]).abs().max().item<double>());
    largest = std::max(largest, ref_grads[i].abs().max().item<double>());
  }
  EXPECT_GT(largest, 0);
  EXPECT_LT(worst, 1e-4 * largest) << "averaged gradient against the whole batch's";
}

TEST_F(GraphedStepNccl, RanksOfDifferentLengthsReplayOneShape) {
  std::vector<int64_t> frames(2), tokens(2);
  std::vector<double> mle(2);
  std::vector<std::vector<torch::Tensor>> weights(2);
  run_nccl_ranks([&](int rank, Distributed& group) {
    const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank));
    models::GlowTTS m = copy_on(reference, device);
    m->train();  // dropout on: the graphs' own RNG, one shape
    FusedAdam opt(m->parameters(), adam());
    StepOptions so = options;
    so.distributed = &group;
    GraphedTrainStep step(m, opt, so);
    torch::manual_seed(20 + rank);
    // Rank 1's batch is longer in text and in frames: rank 0 pads up to its buckets.
    const data::Batch b = rank == 0 ? equal_length_batch(2, 10, 60) : equal_length_batch(2, 40, 200);
    for (int i = 1; i <= 3; ++i) step.step(b, 1e-3, i);
    tokens[rank] = step.inputs().text.size(1);
    frames[rank] = step.inputs().mel.size(2);
    mle[rank] = step.step(b, 1e-3, 4).loss_mle.item<double>();
    EXPECT_EQ(step.graphs(), 1u);
    for (const auto& p : m->parameters()) weights[rank].push_back(p.detach().cpu());
  });
  if (HasFatalFailure()) return;
  EXPECT_EQ(tokens[0], 48);  // 40 rounded up to 16s
  EXPECT_EQ(tokens[1], 48);
  // 200 rounded up to 64s, then maybe a little more where rank 1 measured cuDNN faster
  // (bucket_lengths.h); rank 0 takes rank 1's length.
  EXPECT_EQ(frames[0], frames[1]);
  const BucketLengthOptions lengths;  // named: a range over a temporary's member would dangle
  std::vector<int64_t> allowed;
  for (const int64_t extra : lengths.extra_frames()) {
    allowed.push_back(256 + extra * reference->options().n_sqz());
  }
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), frames[0]), allowed.end()) << frames[0] << " frames";
  EXPECT_EQ(mle[0], mle[1]);
  for (size_t i = 0; i < weights[0].size(); ++i) ASSERT_TRUE(torch::equal(weights[0][i], weights[1][i])) << i;
}

}  // namespace
}  // namespace monoflow::train
