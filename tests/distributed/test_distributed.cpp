// c10d data parallelism on CPU: two ranks as two threads of this process, talking Gloo over
// loopback through a TCPStore, exactly as two processes would.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

#include "common/error.h"
#include "gloo_ranks.h"
#include "train/distributed/distributed.h"

using namespace monoflow::train;

using monoflow::train::testing::run_gloo_ranks;

TEST(Distributed, SingleProcessIsANoOp) {
  Distributed group(DistributedOptions{}, torch::kCPU);
  auto p = torch::ones({3}, torch::requires_grad());
  p.mutable_grad() = torch::full({3}, 2.0);
  group.average_gradients({p});
  EXPECT_TRUE(torch::equal(p.grad(), torch::full({3}, 2.0)));
  EXPECT_EQ(group.average(1.5), 1.5);
  EXPECT_TRUE(group.is_main());
}

TEST(Distributed, GlooAveragesGradientsBroadcastsAndAveragesScalars) {
  if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo headers";
  const int world = 2;
  std::vector<torch::Tensor> grads_after(world), weights_after(world);
  std::vector<double> means(world);
  run_gloo_ranks(world, [&](int rank, Distributed& group) {
    // Each rank holds different gradients (two dtypes, one parameter without a gradient).
    auto w = torch::full({2, 3}, double(rank + 1), torch::kFloat32).requires_grad_();
    auto b = torch::full({4}, double(10 * (rank + 1)), torch::kFloat64).requires_grad_();
    auto unused = torch::zeros({2}).requires_grad_();
    w.mutable_grad() = torch::arange(6, torch::kFloat32).view({2, 3}) * (rank + 1);
    b.mutable_grad() = torch::full({4}, double(rank), torch::kFloat64);
    group.average_gradients({w, b, unused});
    grads_after[rank] = torch::cat({w.grad().reshape(-1).to(torch::kFloat64), b.grad()});
    EXPECT_FALSE(unused.grad().defined());
    group.broadcast({w});
    weights_after[rank] = w.detach().clone();
    means[rank] = group.average(rank == 0 ? 1.0 : 4.0);
    group.barrier();
  });
  // Mean of rank 0 (x1) and rank 1 (x2) is x1.5; the float64 gradients average 0 and 1.
  auto expected = torch::cat({torch::arange(6, torch::kFloat64) * 1.5, torch::full({4}, 0.5, torch::kFloat64)});
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(torch::equal(grads_after[r], expected)) << grads_after[r];
    EXPECT_TRUE(torch::equal(weights_after[r], torch::full({2, 3}, 1.0))) << "rank " << r;
    EXPECT_DOUBLE_EQ(means[r], 2.5);
  }
}

TEST(Distributed, OptionsFromTorchrunEnvironment) {
  setenv("WORLD_SIZE", "4", 1);
  setenv("RANK", "2", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("MASTER_PORT", "1234", 1);
  setenv("MASTER_ADDR", "10.1.2.3", 1);
  DistributedOptions o = distributed_options_from_env();
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.local_rank, 0);
  EXPECT_EQ(o.master_port, 1234);
  EXPECT_EQ(o.master_addr, "10.1.2.3");
  setenv("RANK", "4", 1);
  EXPECT_THROW(distributed_options_from_env(), monoflow::UserError);
  setenv("RANK", "x", 1);
  try {
    distributed_options_from_env();
    ADD_FAILURE() << "no error";
  } catch (const monoflow::UserError& e) {
    EXPECT_STREQ(e.what(), "environment variable RANK='x': expected an integer >= 0");
  }
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT", "MASTER_ADDR"}) unsetenv(v);
  EXPECT_EQ(distributed_options_from_env().world_size, 1);
}
