// Checkpoints written beside training (checkpoint_snapshot.h, checkpoint_writer.h): the
// snapshot holds the state at the moment it was taken whatever later steps do, its file loads
// to what save_checkpoint's does, and a failed background write surfaces on the caller.
#include <gtest/gtest.h>
#include <pthread.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/checkpoint_snapshot.h"
#include "train/checkpoint_writer.h"
#include "train/fused_adam.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc = register_module("fc", torch::nn::Linear(6, 4));
    out = register_module("out", torch::nn::Linear(4, 2));
    scale = register_buffer("scale", torch::arange(2, torch::kFloat32));
  }
  torch::Tensor forward(const torch::Tensor& x) { return out->forward(torch::tanh(fc->forward(x))) * scale; }
  torch::nn::Linear fc{nullptr}, out{nullptr};
  torch::Tensor scale;
};
TORCH_MODULE(Net);

void step(Net& m, FusedAdam& opt, int seed) {
  torch::manual_seed(seed);
  opt.zero_grad();
  m->forward(torch::randn({5, 6}, m->scale.options())).pow(2).sum().backward();
  opt.step();
  m->scale.add_(1);  // buffers change in place too
}

CheckpointState state_at(int64_t step) {
  CheckpointState s;
  s.step = step;
  s.scheduler = "noam";
  s.loader_position = "position " + std::to_string(step);
  s.run_id = "run-1";
  s.rng = capture_rng();
  return s;
}

// Loads `path` into a fresh model and optimizer on `device`: the weights, buffers and moments.
std::vector<torch::Tensor> loaded(const std::string& path, const torch::Device& device, int64_t* steps = nullptr) {
  torch::manual_seed(77);  // other initial weights than the saved ones
  Net m;
  m->to(device);
  FusedAdam opt(m->parameters(), torch::optim::AdamOptions(1e-2));
  const CheckpointState s = load_checkpoint(path, *m, &opt);
  if (steps != nullptr) *steps = s.step;
  std::vector<torch::Tensor> out;
  for (const auto& p : m->parameters()) {
    out.push_back(p.cpu());
    const auto& a = static_cast<torch::optim::AdamParamState&>(*opt.state().at(p.unsafeGetTensorImpl()));
    out.push_back(a.exp_avg().cpu());
    out.push_back(a.exp_avg_sq().cpu());
    out.push_back(torch::tensor(a.step()));
  }
  for (const auto& b : m->buffers()) out.push_back(b.cpu());
  return out;
}

void expect_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "tensor " << i;
}

// Two steps, then save_checkpoint and a snapshot at the same moment; a third step (queued
// behind the snapshot's copies on a GPU) before the snapshot is written. Both files load to the
// same state, and not to the third step's.
void snapshot_ignores_later_steps(const torch::Device& device) {
  TempDir dir;
  torch::manual_seed(1);
  Net m;
  m->to(device);
  FusedAdam opt(m->parameters(), torch::optim::AdamOptions(1e-2));
  step(m, opt, 5);
  step(m, opt, 6);
  const std::string direct = dir / "direct.pt", background = dir / "background.pt", later = dir / "later.pt";
  save_checkpoint(direct, *m, opt, state_at(2));
  CheckpointContents snapshot = checkpoint_snapshot(*m, opt, state_at(2));
  step(m, opt, 7);
  {
    CheckpointWriter writer;
    bool pruned = false, stop_signals_blocked = false;
    writer.write(background, std::move(snapshot), [&] {
      pruned = fs::exists(background);
      sigset_t mask;
      pthread_sigmask(SIG_BLOCK, nullptr, &mask);
      stop_signals_blocked = sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1;
    });
    EXPECT_EQ(writer.wait(), background);
    EXPECT_TRUE(pruned) << "`after` runs once the file is in place";
    EXPECT_TRUE(stop_signals_blocked) << "SIGINT/SIGTERM must reach the loop, not the writer's thread";
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    EXPECT_EQ(sigismember(&mask, SIGINT), 0) << "the caller's own mask is restored";
    EXPECT_EQ(writer.wait(), "") << "a finished write is reported once";
  }
  save_checkpoint(later, *m, opt, state_at(3));
  int64_t steps = 0;
  const auto want = loaded(direct, device), got = loaded(background, device, &steps);
  expect_equal(got, want);
  EXPECT_EQ(steps, 2);
  const auto third = loaded(later, device);
  ASSERT_EQ(third.size(), want.size());
  EXPECT_FALSE(torch::equal(third[0], want[0])) << "the third step changed the weights (else this test proves nothing)";
}

TEST(CheckpointSnapshot, HoldsTheStateWhenTakenAndLoadsAsSaveCheckpointsFile) {
  snapshot_ignores_later_steps(torch::kCPU);
}

TEST(CheckpointSnapshot, OnTheGpuHoldsTheStateWhenTakenWithLaterStepsQueued) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  snapshot_ignores_later_steps(torch::Device(torch::kCUDA, 0));
}

TEST(CheckpointWriter, AFailedWriteSurfacesOnTheCallerNamingTheFileAndTheNextOneWorks) {
  TempDir dir;
  Net m;
  FusedAdam opt(m->parameters(), torch::optim::AdamOptions(1e-2));
  const std::string bad = dir / "missing-folder/ckpt_000000001.pt";
  CheckpointWriter writer;
  writer.write(bad, checkpoint_snapshot(*m, opt, state_at(1)));
  try {
    writer.wait();
    FAIL() << "the write into a missing folder succeeded";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("missing-folder"), std::string::npos) << e.what();
  }
  const std::string good = dir / "ckpt_000000002.pt";
  writer.write(good, checkpoint_snapshot(*m, opt, state_at(2)));
  std::string done;
  while ((done = writer.poll()).empty()) std::this_thread::yield();
  EXPECT_EQ(done, good);
  EXPECT_EQ(read_checkpoint_state(good).step, 2);
  // The destructor waits for a write in flight: the file is complete once the writer is gone.
  const std::string last = dir / "ckpt_000000003.pt";
  {
    CheckpointWriter other;
    other.write(last, checkpoint_snapshot(*m, opt, state_at(3)));
  }
  EXPECT_EQ(read_checkpoint_state(last).step, 3);
}

}  // namespace
}  // namespace monoflow::train
