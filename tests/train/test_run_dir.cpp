// The run directory's contract: the advisory lock (in this process, across processes, after
// a crash), what counts as a run, --force-new moving the old run aside, and the trainer and
// the train tool refusing a directory that holds a run.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "common/error.h"
#include "test_util.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/run_dir.h"
#include "train/signals.h"
#include "train/trainer.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::TempDir;
using testing::run;

// File names of <run_dir>/checkpoints/ckpt_*.pt, oldest first.
std::vector<std::string> checkpoint_names(const std::string& run_dir) {
  std::vector<std::string> names;
  for (const auto& p : list_checkpoints(run_dir + "/checkpoints")) names.push_back(fs::path(p).filename().string());
  return names;
}

int count_lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

TEST(RunDirLock, ASecondHolderIsRefusedWithTheFirstOnesPid) {
  TempDir dir;
  {
    RunDirLock first(dir.path());
    EXPECT_EQ(testing::read_text(dir / "train.lock"), std::to_string(::getpid()) + "\n");
    const std::string e = error_of([&] { RunDirLock second(dir.path()); });
    EXPECT_NE(e.find("another trainer (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << e;
    EXPECT_NE(e.find(dir.path()), std::string::npos) << e;
  }
  RunDirLock again(dir.path());  // released with the first holder
}

// flock goes with the process: a holder killed by SIGKILL leaves the directory free.
TEST(RunDirLock, ACrashedHolderReleasesIt) {
  TempDir dir;
  const std::string lock_path = dir / RunDirLock::kFileName;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // as RunDirLock does, in system calls only (no allocation after fork)
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) ::_exit(1);
    char pid[32];
    const int n = std::snprintf(pid, sizeof pid, "%d\n", static_cast<int>(::getpid()));
    (void)!::write(fd, pid, static_cast<size_t>(n));
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const std::string e = error_of([&] { RunDirLock second(dir.path()); });
  EXPECT_NE(e.find("(pid " + std::to_string(child) + ")"), std::string::npos) << e;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  RunDirLock after(dir.path());
}

TEST(RunDir, ACheckpointOrLoggedMetricsMakeARun) {
  TempDir dir;
  fs::create_directories(dir / "checkpoints");
  fs::create_directories(dir / "cache");
  std::ofstream(dir / "metrics.jsonl");  // empty: nothing to lose
  std::ofstream(dir / "checkpoints/.ckpt_000000003.pt.tmp.1") << "x";
  EXPECT_FALSE(holds_run(dir.path()));
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":1}\n";
  EXPECT_EQ(run_evidence(dir.path()), std::vector<std::string>{"metrics.jsonl"});
  std::ofstream(dir / "checkpoints/ckpt_000000003.pt") << "x";
  std::ofstream(dir / "checkpoints/ckpt_000000006.pt") << "x";
  EXPECT_EQ(run_evidence(dir.path()), (std::vector<std::string>{"checkpoints/ckpt_000000006.pt", "metrics.jsonl"}));
}

TEST(RunDir, MovingAsideTakesTheRunsFilesAndLeavesTheRest) {
  TempDir dir;
  for (const char* d : {"checkpoints", "tensorboard", "images", "samples", "cache"}) fs::create_directories(dir / d);
  std::ofstream(dir / "checkpoints/ckpt_000000003.pt") << "ckpt";
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":1}\n";
  std::ofstream(dir / "config.yaml") << "train: {}\n";
  std::ofstream(dir / "rank1_final.pt") << "r1";
  std::ofstream(dir / "cache/a.mel") << "mel";
  std::ofstream(dir / "notes.txt") << "mine";
  const std::string aside = move_run_aside(dir.path());
  EXPECT_EQ(fs::path(aside).parent_path(), fs::path(dir.path()));
  EXPECT_EQ(fs::path(aside).filename().string().rfind("previous-", 0), 0u) << aside;
  EXPECT_EQ(testing::read_text(aside + "/checkpoints/ckpt_000000003.pt"), "ckpt");
  EXPECT_EQ(testing::read_text(aside + "/metrics.jsonl"), "{\"step\":1}\n");
  for (const char* f : {"config.yaml", "rank1_final.pt", "tensorboard", "images", "samples"}) {
    EXPECT_TRUE(fs::exists(aside + "/" + f)) << f;
    EXPECT_FALSE(fs::exists(dir / f)) << f;
  }
  EXPECT_FALSE(holds_run(dir.path()));
  EXPECT_EQ(testing::read_text(dir / "cache/a.mel"), "mel");
  EXPECT_EQ(testing::read_text(dir / "notes.txt"), "mine");
  // A second move in the same second gets a folder of its own.
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":2}\n";
  const std::string second = move_run_aside(dir.path());
  EXPECT_NE(second, aside);
  EXPECT_EQ(testing::read_text(second + "/metrics.jsonl"), "{\"step\":2}\n");
  EXPECT_EQ(testing::read_text(aside + "/metrics.jsonl"), "{\"step\":1}\n");
}

class TrainerRunDir : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    corpus_ = new TempDir();
    testing::write_tiny_corpus(*corpus_ / "corpus");
  }
  static void TearDownTestSuite() {
    delete corpus_;
    corpus_ = nullptr;
  }
  static std::string corpus() { return *corpus_ / "corpus"; }
  static TempDir* corpus_;
};
TempDir* TrainerRunDir::corpus_ = nullptr;

// The reproduction: a second fresh run into a used directory truncated its metrics
// and pruned its checkpoints. Now it is refused and nothing changes; --force-new keeps the
// old run, whole, in previous-<time>/.
TEST_F(TrainerRunDir, AFreshRunIntoAUsedDirectoryIsRefusedAndForceNewMovesTheOldOneAside) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  run(testing::tiny_config(corpus(), run_dir, 4));
  const std::string metrics = testing::read_text(run_dir + "/metrics.jsonl");
  ASSERT_GE(count_lines(metrics), 4);
  const auto ckpts = checkpoint_names(run_dir);

  const std::string e = error_of([&] { run(testing::tiny_config(corpus(), run_dir, 1)); });
  EXPECT_NE(e.find(run_dir), std::string::npos) << e;
  EXPECT_NE(e.find("holds a run already (checkpoints/ckpt_000000004.pt, metrics.jsonl)"), std::string::npos) << e;
  EXPECT_NE(e.find("--resume"), std::string::npos) << e;
  EXPECT_NE(e.find("--force-new"), std::string::npos) << e;
  EXPECT_EQ(testing::read_text(run_dir + "/metrics.jsonl"), metrics);
  EXPECT_EQ(checkpoint_names(run_dir), ckpts);

  const RunSummary fresh = run(testing::tiny_config(corpus(), run_dir, 1), "", /*force_new=*/true);
  EXPECT_EQ(fresh.step, 1);
  EXPECT_EQ(fresh.checkpoint, run_dir + "/checkpoints/ckpt_000000001.pt");
  EXPECT_TRUE(fs::is_regular_file(fresh.checkpoint));
  EXPECT_EQ(checkpoint_names(run_dir), std::vector<std::string>{"ckpt_000000001.pt"});
  EXPECT_EQ(count_lines(testing::read_text(run_dir + "/metrics.jsonl")), 2);  // step 1 and its validation
  std::vector<fs::path> previous;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    if (entry.path().filename().string().rfind("previous-", 0) == 0) previous.push_back(entry.path());
  }
  ASSERT_EQ(previous.size(), 1u);
  EXPECT_EQ(testing::read_text((previous[0] / "metrics.jsonl").string()), metrics);
  EXPECT_EQ(checkpoint_names(previous[0].string()), ckpts);

  // --resume continues the new run, not the old one.
  const RunSummary resumed = run(testing::tiny_config(corpus(), run_dir, 2), "latest");
  EXPECT_EQ(resumed.step, 2);
}

TEST_F(TrainerRunDir, ASecondTrainerOnALockedDirectoryFailsAtOnceNamingThePid) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  fs::create_directories(run_dir);
  RunDirLock other(run_dir);
  const std::string e = error_of([&] { run(testing::tiny_config(corpus(), run_dir, 1)); });
  EXPECT_NE(e.find("another trainer (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(run_dir + "/metrics.jsonl"));
}

// The tool: the refusal and the lock as exit status 1 with the message; --force-new and
// --resume together are a usage error.
TEST_F(TrainerRunDir, TheTrainToolRefusesAUsedOrLockedDirectory) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(corpus(), run_dir, 1);
  const std::string exe = std::string(MONOFLOW_TRAIN_EXE) + " --config " + (dir / "tiny.yaml");
  int status = 0;
  std::string out = testing::run_command(exe + " 2>&1", &status);
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  out = testing::run_command(exe + " 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("train: error: " + run_dir + ": this run directory holds a run already"), std::string::npos)
      << out;
  out = testing::run_command(exe + " --force-new --resume 2>&1", &status);
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("excludes"), std::string::npos) << out;
  out = testing::run_command(exe + " --force-new 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("--force-new: the previous run in " + run_dir + " moved to " + run_dir + "/previous-"),
            std::string::npos)
      << out;
  {
    RunDirLock held(run_dir);  // a trainer in another process
    out = testing::run_command(exe + " --resume 2>&1", &status);
    EXPECT_EQ(WEXITSTATUS(status), 1) << out;
    EXPECT_NE(out.find("another trainer (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << out;
  }
}

// One way out of every state (issue 28): each message that suggests a next step names one that
// works from that state, and the test takes it.
TEST_F(TrainerRunDir, EveryStateSaysAWayOutThatWorks) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  const auto config = [&](int steps) { return testing::tiny_config(corpus(), run_dir, steps); };

  // 1. A signal before the first step (during the data scan or DDI): no checkpoint, no metrics
  // line. The trainer says so and names the plain start, which works; --resume says the same.
  {
    RunOptions o;
    o.config_yaml = to_yaml(config(2));
    clear_stop_request();
    request_stop(SIGTERM);  // as if SIGTERM came during DDI
    ::testing::internal::CaptureStderr();
    const RunSummary stopped = train(config(2), o);
    const std::string said = ::testing::internal::GetCapturedStderr();
    clear_stop_request();
    EXPECT_TRUE(stopped.interrupted);
    EXPECT_EQ(stopped.step, 0);
    EXPECT_EQ(stopped.checkpoint, "");
    EXPECT_NE(said.find("stopped by signal 15 at step 0, before any checkpoint: nothing to resume; start it again "
                        "without --resume"),
              std::string::npos) << said;
    EXPECT_EQ(said.find("resume with --resume"), std::string::npos) << said;
    EXPECT_FALSE(holds_run(run_dir));
    EXPECT_EQ(error_of([&] { run(config(2), "latest"); }),
              run_dir + ": --resume: no checkpoint here to resume from, and no run; start without --resume, or pass "
                        "--resume PATH");
    EXPECT_EQ(run(config(2)).step, 2);  // the way out
  }

  // 2. Killed during the first checkpoint's write: metrics lines, a dead writer's temp file, no
  // checkpoint. Before, a plain start said "use --resume" and --resume said "start without it";
  // both now name --force-new, which works.
  {
    testing::remove_tree(run_dir + "/checkpoints");
    fs::create_directories(run_dir + "/checkpoints");
    std::ofstream(run_dir + "/checkpoints/" + checkpoint_filename(2) + ".tmp.999999") << "partial";
    ASSERT_TRUE(holds_run(run_dir));
    const std::string fresh = error_of([&] { run(config(2)); });
    EXPECT_EQ(fresh, run_dir + ": this run directory holds a run that stopped before its first checkpoint "
                               "(metrics.jsonl), so there is nothing to resume; start a new one with --force-new "
                               "(moves its files into " + run_dir + "/previous-<time>/), or pick another --run-dir");
    const std::string resumed = error_of([&] { run(config(2), "latest"); });
    EXPECT_EQ(resumed, run_dir + ": --resume: no checkpoint here to resume from: the run in " + run_dir +
                           " stopped before its first checkpoint (its metrics.jsonl is kept); start a new run with "
                           "--force-new (moves the old files into " + run_dir + "/previous-<time>/), or pick another "
                           "--run-dir");
    EXPECT_EQ(run(config(2), "", /*force_new=*/true).step, 2);  // the way out
  }

  // 3. A trainer still running there, before its first checkpoint: --resume gets the lock's
  // message (wait, or another run directory), not "no checkpoint here".
  {
    TempDir other;
    const std::string busy = other / "run";
    fs::create_directories(busy);
    RunDirLock held(busy);
    const std::string e = error_of([&] { run(testing::tiny_config(corpus(), busy, 1), "latest"); });
    EXPECT_EQ(e, busy + ": another trainer (pid " + std::to_string(::getpid()) + ") is using this run directory (lock " +
                     busy + "/train.lock); wait for it to end, or pick another run directory (--run-dir)");
    EXPECT_EQ(lock_holder(busy), std::to_string(::getpid()));
  }
  EXPECT_EQ(lock_holder(run_dir), "");  // no trainer holds it any more
}

}  // namespace
}  // namespace monoflow::train
