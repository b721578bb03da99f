// kill -9 at random moments of a tiny CPU training run, each followed by train --resume: no
// checkpoint is ever corrupt, at most two checkpoint intervals are lost (the newest checkpoint
// may be in the background writer's hands, checkpoint_writer.h), and the final weights
// and every step's losses equal those of an uninterrupted run, bit for bit (issue #13).
// The moments are seeded: the seed is printed, and MONOFLOW_KILL_SEED=<seed> repeats the
// choices (the kills themselves land where the running process happens to be).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "test_util.h"
#include "tiny_corpus.h"
#include "train/atomic_file.h"
#include "train/checkpoint.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kSteps = 40;
constexpr int kInterval = 2;  // checkpoint interval
constexpr int kKills = 10;

// Starts the train tool on `config` with `extra` arguments, its output appended to `log`.
pid_t start_train(const std::string& config, const std::vector<std::string>& extra, const std::string& log) {
  std::vector<std::string> args = {MONOFLOW_TRAIN_EXE, "--config", config, "--set",
                                   "train.checkpoint_interval=" + std::to_string(kInterval), "--set",
                                   "train.val_interval=7"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // system calls only until exec
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// The highest step of a training line in metrics.jsonl (0 when none).
int64_t logged_step(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  int64_t top = 0;
  for (std::string line; std::getline(in, line);) {
    long long s = 0;
    if (std::sscanf(line.c_str(), "{\"step\":%lld", &s) == 1 && line.find("loss/mle") != std::string::npos) {
      top = std::max<int64_t>(top, s);
    }
  }
  return top;
}

// The step of the newest checkpoint in `dir` (0 when none): progress only the running
// process makes (metrics.jsonl may still hold a killed run's later lines until the resume).
int64_t newest_step(const std::string& dir) {
  const std::string path = newest_checkpoint(dir);
  return path.empty() ? 0 : std::stoll(std::filesystem::path(path).filename().string().substr(5, 9));
}

bool temp_file_in(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (is_temporary_file(e.path().filename().string())) return true;
  }
  return false;
}

// step -> the losses, learning rate and gradient norm of its training line.
std::map<int64_t, std::vector<double>> training_lines(const std::string& run_dir) {
  std::map<int64_t, std::vector<double>> out;
  std::istringstream in(testing::read_text(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const YAML::Node n = YAML::Load(line);
    if (!n["loss/mle"]) continue;
    auto& row = out[n["step"].as<int64_t>()];
    for (const char* key : {"loss/mle", "loss/dur", "lr", "grad_norm"}) row.push_back(n[key].as<double>());
  }
  return out;
}

int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(KillResume, TenRandomKillsThenResumeTrainExactlyAsAnUninterruptedRun) {
  uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("MONOFLOW_KILL_SEED")) seed = std::strtoull(env, nullptr, 10);
  std::cout << "kill -9 seed " << seed << " (MONOFLOW_KILL_SEED=" << seed << " repeats the choices)" << std::endl;
  RecordProperty("kill_seed", std::to_string(seed));
  std::mt19937_64 rng(seed);

  TempDir dir;
  const std::string corpus = testing::suite_corpus();
  const std::string ref_dir = dir / "straight", run_dir = dir / "killed", ckpt_dir = run_dir + "/checkpoints";
  std::ofstream(dir / "straight.yaml") << testing::tiny_config_yaml(corpus, ref_dir, kSteps);
  std::ofstream(dir / "killed.yaml") << testing::tiny_config_yaml(corpus, run_dir, kSteps);
  // The uninterrupted run goes alongside (it shares nothing with the killed one but the corpus).
  const pid_t straight = start_train(dir / "straight.yaml", {}, dir / "straight.log");

  int at_step = 0, at_write = 0, at_time = 0;
  for (int k = 0; k < kKills; ++k) {
    std::vector<std::string> extra;
    if (!newest_checkpoint(ckpt_dir).empty()) extra = {"--resume"};
    else if (fs::exists(run_dir + "/metrics.jsonl")) extra = {"--force-new"};  // killed before its first checkpoint
    const pid_t pid = start_train(dir / "killed.yaml", extra, dir / "killed.log");
    // Where to strike: once the run has written a checkpoint one or two intervals past the
    // one it resumed from, plus a random delay (mid-step, validation, logging); as such a
    // checkpoint is being written (its temp file seen); or at a random time after the start
    // (start-up, data scan, loading). Always well before the run could end.
    const int64_t target = std::min<int64_t>(newest_step(ckpt_dir) + kInterval * (1 + static_cast<int64_t>(rng() % 2)),
                                             kSteps - 4);
    const int mode = static_cast<int>(rng() % 10);  // 0-1: time, 2-4: checkpoint write, else step
    const auto delay = std::chrono::microseconds(rng() % 300000);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(rng() % 4000);
    bool exited = false;
    while (true) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      const int64_t now = newest_step(ckpt_dir);
      if (mode < 2) {
        if (std::chrono::steady_clock::now() >= deadline || now >= kSteps - 4) {
          ++at_time;
          break;
        }
      } else if (mode < 5 && now >= target - kInterval && temp_file_in(ckpt_dir)) {
        ++at_write;
        break;
      } else if (now >= target) {
        std::this_thread::sleep_for(delay);
        ++at_step;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_FALSE(exited) << "kill " << k << ": the run ended before the kill\n" << testing::read_text(dir / "killed.log");
    ::kill(pid, SIGKILL);
    const int status = wait_for(pid);
    const int64_t reached = logged_step(run_dir);
    // No checkpoint is damaged, and the newest is at most two intervals behind the last step.
    int64_t newest = 0;
    for (const auto& path : list_checkpoints(ckpt_dir)) {
      EXPECT_NO_THROW(newest = read_checkpoint_state(path).step) << "kill " << k << ": " << path;
    }
    EXPECT_GE(newest, reached - 2 * kInterval) << "kill " << k;
    std::cout << "kill " << k << ": " << (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? "killed" : "ended")
              << " at logged step " << reached << ", newest checkpoint " << newest << std::endl;
  }
  std::cout << "kills after a step: " << at_step << ", during a checkpoint write: " << at_write
            << ", at a random time: " << at_time << std::endl;

  const pid_t last = start_train(dir / "killed.yaml", {newest_checkpoint(ckpt_dir).empty() ? "--force-new" : "--resume"},
                                 dir / "killed.log");
  const int last_status = wait_for(last), straight_status = wait_for(straight);
  ASSERT_TRUE(WIFEXITED(last_status) && WEXITSTATUS(last_status) == 0) << testing::read_text(dir / "killed.log");
  ASSERT_TRUE(WIFEXITED(straight_status) && WEXITSTATUS(straight_status) == 0) << testing::read_text(dir / "straight.log");
  EXPECT_FALSE(temp_file_in(ckpt_dir));

  // Bit for bit: every step's training line, and the final weights.
  const auto a = training_lines(ref_dir), b = training_lines(run_dir);
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), static_cast<size_t>(kSteps));
  for (int64_t s = 1; s <= kSteps; ++s) EXPECT_EQ(a.at(s), b.at(s)) << "step " << s;
  CheckpointState sa, sb;
  const auto wa = read_checkpoint_weights(newest_checkpoint(ref_dir + "/checkpoints"), &sa);
  const auto wb = read_checkpoint_weights(newest_checkpoint(ckpt_dir), &sb);
  EXPECT_EQ(sa.step, kSteps);
  EXPECT_EQ(sb.step, kSteps);
  ASSERT_EQ(wa.size(), wb.size());
  ASSERT_GT(wa.size(), 10u);
  for (size_t i = 0; i < wa.size(); ++i) {
    EXPECT_EQ(wa[i].first, wb[i].first);
    EXPECT_TRUE(torch::equal(wa[i].second, wb[i].second)) << wa[i].first;
  }
}

}  // namespace
}  // namespace monoflow::train
