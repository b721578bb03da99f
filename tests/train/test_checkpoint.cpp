#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "test_util.h"
#include "train/atomic_file.h"
#include "train/checkpoint.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct TinyImpl : torch::nn::Module {
  explicit TinyImpl(int64_t width = 4, int64_t big = 0) {
    fc = register_module("fc", torch::nn::Linear(width, 3));
    scale = register_buffer("scale", torch::arange(3, torch::kFloat32));
    if (big > 0) blob = register_parameter("blob", torch::randn({big}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x) * scale; }
  torch::nn::Linear fc{nullptr};
  torch::Tensor scale, blob;
};
TORCH_MODULE(Tiny);

void train_one_step(Tiny& m, torch::optim::Adam& opt, int seed) {
  torch::manual_seed(seed);
  opt.zero_grad();
  m->forward(torch::randn({5, 4})).pow(2).sum().backward();
  opt.step();
}

CheckpointState some_state() {
  CheckpointState s;
  s.step = 42;
  s.epoch = 3;
  s.nonfinite_total = 2;
  s.scheduler = "noam";
  s.loader_position = std::string("pos\0tion", 8);
  s.config_yaml = "train:\n  batch_size: 8\n";
  torch::manual_seed(99);
  s.rng = capture_rng();
  return s;
}

bool same_params(Tiny& a, Tiny& b) {
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& p : pa) {
    if (!torch::equal(p.value(), pb[p.key()])) return false;
  }
  return true;
}

TEST(Checkpoint, RoundTripRestoresEverything) {
  TempDir dir;
  torch::manual_seed(1);
  Tiny a;
  torch::optim::Adam opt_a(a->parameters(), torch::optim::AdamOptions(1e-2).betas({0.9, 0.98}).eps(1e-9));
  train_one_step(a, opt_a, 5);
  train_one_step(a, opt_a, 6);
  const std::string path = dir / checkpoint_filename(42);
  save_checkpoint(path, *a, opt_a, some_state());

  torch::manual_seed(2);
  Tiny b;  // different initial weights
  b->scale.fill_(-1);
  torch::optim::Adam opt_b(b->parameters(), torch::optim::AdamOptions(1e-2).betas({0.9, 0.98}).eps(1e-9));
  const CheckpointState s = load_checkpoint(path, *b, &opt_b);
  EXPECT_EQ(s.step, 42);
  EXPECT_EQ(s.epoch, 3);
  EXPECT_EQ(s.nonfinite_total, 2);
  EXPECT_EQ(s.scheduler, "noam");
  EXPECT_EQ(s.loader_position, std::string("pos\0tion", 8));
  EXPECT_EQ(s.config_yaml, "train:\n  batch_size: 8\n");
  EXPECT_TRUE(same_params(a, b));
  EXPECT_TRUE(torch::equal(b->scale, a->scale));

  // The optimizer's moments came back: one more identical step gives identical weights.
  train_one_step(a, opt_a, 7);
  train_one_step(b, opt_b, 7);
  EXPECT_TRUE(same_params(a, b));

  // The RNG state restores the generator to where it was captured.
  torch::manual_seed(99);
  const torch::Tensor expected = torch::rand({4});
  torch::manual_seed(0);
  restore_rng(s.rng);
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
}

TEST(Checkpoint, ListNewestAndPruneKeepsK) {
  TempDir dir;
  Tiny m;
  torch::optim::Adam opt(m->parameters());
  for (int step : {5, 100, 20, 1000}) {
    CheckpointState s;
    s.step = step;
    save_checkpoint(dir / checkpoint_filename(step), *m, opt, s);
  }
  std::ofstream(dir / ".ckpt_000000007.pt.tmp.999999") << "partial";
  std::ofstream(dir / "notes.txt") << "not a checkpoint";
  auto all = list_checkpoints(dir.path());
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(fs::path(all.front()).filename(), "ckpt_000000005.pt");
  EXPECT_EQ(fs::path(newest_checkpoint(dir.path())).filename(), "ckpt_000001000.pt");
  prune_checkpoints(dir.path(), 2);
  all = list_checkpoints(dir.path());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(fs::path(all[0]).filename(), "ckpt_000000100.pt");
  EXPECT_EQ(fs::path(all[1]).filename(), "ckpt_000001000.pt");
  EXPECT_FALSE(fs::exists(dir / ".ckpt_000000007.pt.tmp.999999"));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  EXPECT_EQ(newest_checkpoint(dir / "missing"), "");
}

void expect_refused(const std::string& path, Tiny& m, const std::string& words) {
  try {
    load_checkpoint(path, *m, nullptr);
    FAIL() << "loaded " << path;
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, CorruptFilesAreRefusedByName) {
  TempDir dir;
  torch::manual_seed(1);
  Tiny m;
  torch::optim::Adam opt(m->parameters());
  const std::string good = dir / checkpoint_filename(1);
  save_checkpoint(good, *m, opt, some_state());
  const std::string bytes = testing::read_text(good);
  const auto before = m->fc->weight.clone();

  const std::string truncated = dir / "truncated.pt";
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_refused(truncated, m, "corrupt");

  const std::string garbage = dir / "garbage.pt";
  std::ofstream(garbage, std::ios::binary) << "this is not a checkpoint at all";
  expect_refused(garbage, m, "corrupt");

  expect_refused(dir / "missing.pt", m, "no such checkpoint");

  // A LibTorch archive that is not ours.
  const std::string foreign = dir / "foreign.pt";
  torch::serialize::OutputArchive a;
  a.write("weight", torch::ones({2}));
  a.save_to(foreign);
  expect_refused(foreign, m, "not a monoflow checkpoint");

  EXPECT_TRUE(torch::equal(m->fc->weight, before)) << "a refused load must not touch the model";
}

TEST(Checkpoint, IncompatibleModelIsRefusedNamingTheParameter) {
  TempDir dir;
  Tiny small(4);
  torch::optim::Adam opt(small->parameters());
  const std::string path = dir / checkpoint_filename(1);
  save_checkpoint(path, *small, opt, some_state());
  Tiny wide(6);
  expect_refused(path, wide, "incompatible checkpoint");
  expect_refused(path, wide, "fc.weight");
}

// A writer killed with SIGKILL at any moment must leave the previous checkpoint loadable and no
// half-written file under a checkpoint name.
TEST(Checkpoint, KillDuringWriteLeavesThePreviousOneLoadable) {
  TempDir dir;
  torch::manual_seed(1);
  Tiny first(4, 4 << 20);  // 16 MiB of weights: the write takes a while
  torch::optim::Adam opt(first->parameters());
  CheckpointState s = some_state();
  s.step = 1;
  save_checkpoint(dir / checkpoint_filename(1), *first, opt, s);

  int killed_mid_write = 0, completed = 0;
  for (int trial = 0; trial < 12; ++trial) {
    fs::remove(dir / checkpoint_filename(2));
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Tiny second(4, 4 << 20);
      torch::optim::Adam opt2(second->parameters());
      CheckpointState s2;
      s2.step = 2;
      save_checkpoint(dir / checkpoint_filename(2), *second, opt2, s2);
      _exit(0);
    }
    usleep(static_cast<useconds_t>(trial * 15000));  // 0 .. 165 ms
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);

    bool leftover = false;
    for (const auto& e : fs::directory_iterator(dir.path())) {
      leftover |= is_temporary_file(e.path().filename().string());
    }
    killed_mid_write += leftover;
    const auto all = list_checkpoints(dir.path());
    completed += all.size() == 2;
    // Every file under a checkpoint name loads completely.
    for (const auto& path : all) {
      Tiny probe(4, 4 << 20);
      const CheckpointState got = load_checkpoint(path, *probe, nullptr);
      if (got.step == 1) EXPECT_TRUE(same_params(probe, first));
    }
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(fs::path(all.front()).filename(), checkpoint_filename(1));
    prune_checkpoints(dir.path(), 10);  // clears the dead writer's temp file
  }
  // The test only means something if some kills landed inside the write.
  EXPECT_GT(killed_mid_write, 0) << "no kill hit a write in progress; completed " << completed;
}

}  // namespace
}  // namespace monoflow::train
