// Data-parallel training on CPU over Gloo: one averaged step on two ranks (threads) equals one
// step on the concatenated batch, and two `train` processes started by scripts/launch.sh end
// with identical weights, one writer of metrics and checkpoints, and finite losses.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <vector>

#include <dirent.h>
#include <sys/file.h>
#include <fcntl.h>

#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "test_util.h"
#include "../distributed/gloo_ranks.h"
#include "tiny_corpus.h"
#include "weights_util.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/distributed/distributed.h"
#include "train/distributed/gradient_reducer.h"
#include "train/config/options_map.h"
#include "train/run_dir.h"
#include "train/train_step.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A port of its own for each test of each process (parallel ctest runs, other suites).
using testing::free_port;
using testing::expect_same_weights;
using testing::load_weights;
using testing::tiny_model;

void copy_weights(models::GlowTTS& from, models::GlowTTS& to) {
  torch::NoGradGuard no_grad;
  const auto src = from->parameters();
  const auto dst = to->parameters();
  for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

data::Batch slice(const data::Batch& b, int64_t begin, int64_t end) {
  data::Batch s;
  s.text = b.text.slice(0, begin, end);
  s.text_lengths = b.text_lengths.slice(0, begin, end);
  s.mel = b.mel.slice(0, begin, end);
  s.mel_lengths = b.mel_lengths.slice(0, begin, end);
  return s;
}

// A batch of random token ids and random mels (around -5, log-mel scale) with the given
// lengths, each item padded to the longest.
data::Batch random_batch(const Config& c, const std::vector<int64_t>& text_lengths,
                         const std::vector<int64_t>& mel_lengths) {
  const int64_t items = static_cast<int64_t>(text_lengths.size());
  data::Batch b;
  b.text = torch::randint(1, 20, {items, *std::max_element(text_lengths.begin(), text_lengths.end())}, torch::kInt64);
  b.text_lengths = torch::tensor(text_lengths, torch::kInt64);
  b.mel = torch::randn({items, c.data.mel.n_mel_channels, *std::max_element(mel_lengths.begin(), mel_lengths.end())}) - 5;
  b.mel_lengths = torch::tensor(mel_lengths, torch::kInt64);
  return b;
}

// A model with init's weights, without DDI and in eval mode: no dropout, whose masks would
// differ between the runs compared (training mode changes nothing else).
models::GlowTTS replica_of(models::GlowTTS& init, const Config& c) {
  models::GlowTTS m = tiny_model(c);
  copy_weights(init, m);
  m->set_ddi(false);
  m->eval();
  return m;
}

// One training step on two ranks (threads) over Gloo, with the tiny model's config.
class DistributedTrainStep : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo headers";
  }
  TempDir dir;
  const Config c = testing::tiny_config(dir / "corpus", dir / "run", 1);
};

// Two `train` processes (scripts/launch.sh or two shells) on the tiny corpus.
class DistributedTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo headers";
    testing::write_tiny_corpus(corpus);
  }
  // Writes dir/tiny.yaml, the tiny run of max_steps steps into run_dir, and returns its path.
  std::string write_config(int max_steps) {
    std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(corpus, run_dir, max_steps);
    return dir / "tiny.yaml";
  }
  TempDir dir;
  const std::string corpus = dir / "corpus";
  const std::string run_dir = dir / "run";
};

// With every item of the same text and mel length, both losses of a batch are the mean of its
// halves' losses, so the averaged gradient of two ranks is the gradient of the whole batch.
TEST_F(DistributedTrainStep, TwoRanksAveragedEqualOneStepOnTheConcatenatedBatch) {
  torch::manual_seed(11);
  const data::Batch full = random_batch(c, {6, 6, 6, 6}, {24, 24, 24, 24});

  // Three copies of the same initial weights, made before any thread runs.
  torch::manual_seed(3);
  models::GlowTTS reference = tiny_model(c);
  // eval(): no dropout (its masks would differ between the runs); training mode changes nothing else.
  reference->set_ddi(false);
  reference->eval();
  std::vector<models::GlowTTS> ranks{replica_of(reference, c), replica_of(reference, c)};

  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(0.1));
  const StepResult ref = train_step(reference, ref_opt, full, 0.1, StepOptions{});
  ASSERT_TRUE(ref.finite);

  std::vector<StepResult> results(2);
  testing::run_gloo_ranks(2, [&](int rank, Distributed& group) {
    torch::optim::SGD opt(ranks[rank]->parameters(), torch::optim::SGDOptions(0.1));
    StepOptions so;
    so.distributed = &group;
    results[rank] = train_step(ranks[rank], opt, slice(full, 2 * rank, 2 * rank + 2), 0.1, so);
  });
  if (HasFatalFailure()) return;
  ASSERT_TRUE(results[0].finite && results[1].finite);

  // The halves' losses differ; their mean is the whole batch's loss.
  EXPECT_NE(results[0].loss_mle.item<double>(), results[1].loss_mle.item<double>());
  const double mle = (results[0].loss_mle.item<double>() + results[1].loss_mle.item<double>()) / 2;
  const double dur = (results[0].loss_dur.item<double>() + results[1].loss_dur.item<double>()) / 2;
  EXPECT_NEAR(mle, ref.loss_mle.item<double>(), 1e-5 * std::abs(ref.loss_mle.item<double>()));
  EXPECT_NEAR(dur, ref.loss_dur.item<double>(), 1e-5 * std::abs(ref.loss_dur.item<double>()) + 1e-6);
  // Same averaged gradient on both ranks (bit for bit), equal to the whole batch's.
  EXPECT_EQ(results[0].grad_norm.item<double>(), results[1].grad_norm.item<double>());
  EXPECT_NEAR(results[0].grad_norm.item<double>(), ref.grad_norm.item<double>(),
              1e-4 * ref.grad_norm.item<double>());
  const auto pr = reference->named_parameters();
  const auto p1 = ranks[1]->named_parameters();
  int64_t compared = 0, moved = 0;
  for (const auto& p : ranks[0]->named_parameters()) {
    ASSERT_TRUE(torch::equal(p.value(), p1[p.key()])) << p.key();
    EXPECT_TRUE(torch::allclose(p.value(), pr[p.key()], 1e-4, 1e-6)) << p.key();
    ++compared;
  }
  // The step did change the weights (the comparison is not of untouched initial values).
  for (const auto& g : reference->parameters()) moved += g.grad().defined() && g.grad().abs().sum().item<double>() > 0;
  EXPECT_GT(compared, 10);
  EXPECT_GT(moved, 10);
}

// Averaging during backward (GradientReducer, small buckets so that there are many) gives
// the same gradients, bit for bit, as averaging after it, and every bucket starts while
// backward still runs (each parameter of the model gets exactly one gradient contribution).
TEST_F(DistributedTrainStep, AveragingDuringBackwardEqualsAveragingAfterIt) {
  torch::manual_seed(17);
  const data::Batch b = random_batch(c, {7, 6, 5, 7}, {28, 24, 20, 26});
  torch::manual_seed(4);
  models::GlowTTS init = tiny_model(c);
  // Per rank: [0] averages during backward, [1] after it.
  std::vector<std::vector<models::GlowTTS>> models(2);
  for (auto& pair : models) {
    for (int k = 0; k < 2; ++k) pair.push_back(replica_of(init, c));
  }
  std::vector<int> buckets(2), overlapped(2);
  std::vector<StepResult> during(2), after(2);
  testing::run_gloo_ranks(2, [&](int rank, Distributed& group) {
    const data::Batch mine = slice(b, 2 * rank, 2 * rank + 2);
    GradientReducer reducer(group, models[rank][0]->parameters(), /*bucket_bytes=*/16 << 10);
    torch::optim::SGD opt0(models[rank][0]->parameters(), torch::optim::SGDOptions(0.1));
    StepOptions so;
    so.distributed = &group;
    so.reducer = &reducer;
    during[rank] = train_step(models[rank][0], opt0, mine, 0.1, so);
    buckets[rank] = reducer.buckets();
    overlapped[rank] = reducer.overlapped();
    torch::optim::SGD opt1(models[rank][1]->parameters(), torch::optim::SGDOptions(0.1));
    so.reducer = nullptr;
    after[rank] = train_step(models[rank][1], opt1, mine, 0.1, so);
  });
  if (HasFatalFailure()) return;
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(during[rank].finite && after[rank].finite);
    EXPECT_GE(buckets[rank], 10);
    EXPECT_EQ(overlapped[rank], buckets[rank]);
    EXPECT_EQ(during[rank].grad_norm.item<double>(), after[rank].grad_norm.item<double>());
    SCOPED_TRACE("rank " + std::to_string(rank));
    expect_same_weights(models[rank][0], models[rank][1]);
    if (HasFatalFailure()) return;
  }
  expect_same_weights(models[0][0], models[1][0]);
}

// A non-finite loss on one rank makes every rank skip the update (and none hangs).
TEST_F(DistributedTrainStep, ANonFiniteLossOnOneRankSkipsTheStepOnAll) {
  torch::manual_seed(5);
  std::vector<models::GlowTTS> ranks{tiny_model(c), tiny_model(c)};
  copy_weights(ranks[0], ranks[1]);
  data::Batch b;
  b.text = torch::tensor({{5, 6, 7, 8}, {9, 10, 11, 0}}, torch::kInt64);
  b.text_lengths = torch::tensor({4, 3}, torch::kInt64);
  b.mel = torch::randn({2, c.data.mel.n_mel_channels, 24}) - 5;
  b.mel_lengths = torch::tensor({24, 20}, torch::kInt64);
  std::vector<std::vector<torch::Tensor>> before(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r]->set_ddi(false);
    for (const auto& p : ranks[r]->parameters()) before[r].push_back(p.detach().clone());
  }
  std::vector<int> finite(2, -1);
  testing::run_gloo_ranks(2, [&](int rank, Distributed& group) {
    torch::optim::SGD opt(ranks[rank]->parameters(), torch::optim::SGDOptions(0.1));
    StepOptions so;
    so.distributed = &group;
    data::Batch mine = b;
    if (rank == 1) {
      mine.mel = b.mel.clone();
      mine.mel[0][0][0] = std::numeric_limits<float>::quiet_NaN();
    }
    finite[rank] = train_step(ranks[rank], opt, mine, 0.1, so).finite ? 1 : 0;
    // Both still meet for the next collective: nobody is stuck in a gradient all-reduce.
    EXPECT_EQ(group.average(rank), 0.5);
  });
  if (HasFatalFailure()) return;
  EXPECT_EQ(finite[0], 0);
  EXPECT_EQ(finite[1], 0);
  for (int r = 0; r < 2; ++r) {
    const auto params = ranks[r]->parameters();
    for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], before[r][i])) << r << " " << i;
  }
}

// Two `train` processes through scripts/launch.sh: rank 0 alone writes metrics and
// checkpoints, rank 1 (by the test-only MONOFLOW_DEBUG_RANK_CHECKPOINTS) writes its final
// weights, and they equal rank 0's checkpoint.
TEST_F(DistributedTrainer, TwoProcessesEndWithIdenticalWeights) {
  const std::string config = write_config(4);
  const std::string launch = std::string(MONOFLOW_TEST_DIR) + "/../../scripts/launch.sh";
  const std::string command = "MASTER_PORT=" + std::to_string(free_port()) +
                              " MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 timeout 120 " + launch + " 2 " +
                              MONOFLOW_TRAIN_EXE + " --config " + config + " --set data.num_workers=1 2>&1";
  int status = 0;
  const std::string out = testing::run_command(command, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("2 processes (gloo)"), std::string::npos) << out;
  // one `done:` line for the run, rank 0's
  size_t done_lines = 0;
  for (size_t at = out.find("done: "); at != std::string::npos; at = out.find("done: ", at + 1)) ++done_lines;
  EXPECT_EQ(done_lines, 1u) << out;

  // Rank 0's checkpoint of the last step loads, and rank 1 ended with the same weights.
  const std::string ckpt = run_dir + "/checkpoints/" + checkpoint_filename(4);
  ASSERT_TRUE(fs::is_regular_file(ckpt)) << out;
  ASSERT_TRUE(fs::is_regular_file(run_dir + "/rank1_final.pt")) << out;
  EXPECT_FALSE(fs::exists(run_dir + "/rank0_final.pt"));
  EXPECT_EQ(read_checkpoint_state(ckpt).step, 4);
  EXPECT_EQ(read_checkpoint_state(run_dir + "/rank1_final.pt").step, 4);
  const Config c = testing::tiny_config(corpus, run_dir, 4);
  models::GlowTTS a = load_weights(c, ckpt), b = load_weights(c, run_dir + "/rank1_final.pt");
  expect_same_weights(a, b);
  if (HasFatalFailure()) return;

  // One line per step (a single writer), finite averaged losses.
  std::map<int64_t, int> lines;
  std::istringstream in(testing::read_text(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const YAML::Node n = YAML::Load(line);
    if (!n["loss/mle"]) continue;
    ++lines[n["step"].as<int64_t>()];
    EXPECT_TRUE(std::isfinite(n["loss/mle"].as<double>())) << line;
    EXPECT_TRUE(std::isfinite(n["loss/dur"].as<double>())) << line;
  }
  EXPECT_EQ(lines, (std::map<int64_t, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));

  // Both ranks resume from rank 0's checkpoint and still agree two steps later.
  const std::string resume = "MASTER_PORT=" + std::to_string(free_port()) +
                             " MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 timeout 120 " + launch + " 2 " + MONOFLOW_TRAIN_EXE +
                             " --config " + config + " --set data.num_workers=1 --max-steps 6 --resume 2>&1";
  const std::string out2 = testing::run_command(resume, &status);
  ASSERT_EQ(status, 0) << out2;
  EXPECT_NE(out2.find("resumed from " + ckpt + " at step 4"), std::string::npos) << out2;
  const std::string ckpt6 = run_dir + "/checkpoints/" + checkpoint_filename(6);
  ASSERT_TRUE(fs::is_regular_file(ckpt6)) << out2;
  EXPECT_EQ(read_checkpoint_state(run_dir + "/rank1_final.pt").step, 6);
  models::GlowTTS a6 = load_weights(c, ckpt6), b6 = load_weights(c, run_dir + "/rank1_final.pt");
  expect_same_weights(a6, b6);
}

// Both ranks stopped at one step, early in the run: rank 0's newest checkpoint and rank 1's final
// weights (MONOFLOW_DEBUG_RANK_CHECKPOINTS) hold the same step, past the first and before 1000.
// Returns that checkpoint ("" when there is none: the caller asserts on it).
std::string expect_ranks_stopped_together(const std::string& run_dir, const std::string& log) {
  const std::string ckpt = newest_checkpoint(run_dir + "/checkpoints");
  EXPECT_FALSE(ckpt.empty()) << log;
  if (ckpt.empty()) return ckpt;
  const int64_t step = read_checkpoint_state(ckpt).step;
  EXPECT_GE(step, 2);
  EXPECT_LT(step, 1000);
  EXPECT_EQ(read_checkpoint_state(run_dir + "/rank1_final.pt").step, step);
  return ckpt;
}

// SIGTERM to rank 1 alone: both ranks stop at the same step (the stop flag is shared each
// step), rank 0 writes the checkpoint of that step, and neither hangs.
TEST_F(DistributedTrainer, ASignalToOneRankStopsBothAtTheSameStep) {
  const std::string config = write_config(1000);
  std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) +
                    " MONOFLOW_DEBUG_RANK_CHECKPOINTS=1";
  const std::string train = std::string(MONOFLOW_TRAIN_EXE) + " --config " + config +
                            " --set data.num_workers=1 --set train.val_interval=0 --set train.checkpoint_interval=1000";
  const std::string command = "cd " + dir.path() + " && ((" + env + " RANK=0 LOCAL_RANK=0 timeout 120 " + train +
                              " > rank0.log 2>&1; echo $? > rank0.rc) & " + env + " RANK=1 LOCAL_RANK=1 " + train +
                              " > rank1.log 2>&1 & echo $! > rank1.pid; wait)";
  // Rank 1 runs without timeout(1), which would signal it a second time (a second signal
  // exits at once); rank 0's timeout ends rank 1 too should the test go wrong.
  const int status = testing::run_signalling_at_step_two(command, run_dir, dir / "rank1.pid", SIGTERM);
  const std::string log0 = testing::read_text(dir / "rank0.log"), log1 = testing::read_text(dir / "rank1.log");
  ASSERT_EQ(status, 0) << log0 << log1;
  ASSERT_NE(log0.find("(signal)"), std::string::npos) << log0;
  EXPECT_EQ(log1.find("done:"), std::string::npos) << log1;  // one done: line per run, rank 0's
  // Rank 0 got no signal itself, yet reports rank 1's and exits as interrupted: 128 + SIGTERM.
  EXPECT_NE(log0.find("stopped by signal 15 "), std::string::npos) << log0;
  EXPECT_EQ(std::atoi(testing::read_text(dir / "rank0.rc").c_str()), 128 + SIGTERM) << log0;
  ASSERT_FALSE(expect_ranks_stopped_together(run_dir, log0).empty());
}

// The processes whose command line mentions `needle` (a test's own temp folder), other than
// this one.
std::vector<int> processes_mentioning(const std::string& needle) {
  std::vector<int> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (const dirent* e = ::readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string cmdline = testing::read_text("/proc/" + std::string(e->d_name) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) found.push_back(pid);
  }
  ::closedir(proc);
  return found;
}

// What a scheduler does: SIGTERM to scripts/launch.sh alone. The launcher passes it to both
// ranks and waits: they stop at one step with a checkpoint, the launcher exits 143 after them,
// no rank is left running, the run directory's lock is free, and --resume continues the run.
// Each rank has --max-minutes 2, so a launcher that orphans its ranks fails the test instead
// of leaving them to train for long.
TEST_F(DistributedTrainer, SigtermToTheLauncherStopsEveryRankWithACheckpoint) {
  const std::string config = write_config(1000);
  const std::string launch = std::string(MONOFLOW_SCRIPTS_DIR) + "/launch.sh";
  const std::string train = std::string(MONOFLOW_TRAIN_EXE) + " --config " + config +
                            " --set data.num_workers=1 --set train.val_interval=0";
  const std::string command = "cd " + dir.path() + " && (MASTER_PORT=" + std::to_string(free_port()) +
                              " MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 " + launch + " 2 " + train +
                              " --set train.checkpoint_interval=1000 --max-minutes 2 > launch.log 2>&1 & echo $! > "
                              "launch.pid; wait $!; echo $? > launch.rc)";
  const auto started = std::chrono::steady_clock::now();
  testing::run_signalling_at_step_two(command, run_dir, dir / "launch.pid", SIGTERM);
  const std::string log = testing::read_text(dir / "launch.log");
  const int rc = std::atoi(testing::read_text(dir / "launch.rc").c_str());

  // No rank outlives the launcher (any left over are ended here, so the test fails quickly).
  const std::vector<int> left = processes_mentioning(dir.path() + "/tiny.yaml");
  for (int pid : left) ::kill(pid, SIGKILL);
  EXPECT_TRUE(left.empty()) << left.size() << " rank(s) still running after the launcher exited\n" << log;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(100)) << log;
  ASSERT_EQ(rc, 128 + SIGTERM) << log;
  // Both ranks stopped by the signal, at the same step, with rank 0's checkpoint of that step.
  EXPECT_NE(log.find("stopped by signal 15 "), std::string::npos) << log;
  const std::string ckpt = expect_ranks_stopped_together(run_dir, log);
  ASSERT_FALSE(ckpt.empty()) << log;
  const int64_t step = read_checkpoint_state(ckpt).step;

  // The lock is free: another process takes it at once.
  const int fd = ::open((run_dir + "/" + RunDirLock::kFileName).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << "train.lock is still held";
  ::close(fd);

  // A scheduler's next try: --resume through the launcher continues from that checkpoint.
  int status = 0;
  const std::string out = testing::run_command(
      "MASTER_PORT=" + std::to_string(free_port()) + " timeout 120 " + launch + " 2 " + train +
          " --max-steps " + std::to_string(step + 2) + " --resume 2>&1",
      &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("resumed from " + ckpt + " at step " + std::to_string(step)), std::string::npos) << out;
  EXPECT_EQ(read_checkpoint_state(newest_checkpoint(run_dir + "/checkpoints")).step, step + 2) << out;
}

}  // namespace
}  // namespace monoflow::train
