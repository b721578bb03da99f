// scripts/launch.sh: how the launcher ends when its ranks end on their own (the signal paths
// are tested with real `train` ranks in tests/train/test_distributed_train.cpp).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace {

// Runs `launch.sh N sh -c BODY` under a 30 s timeout; returns its exit status (124: it hung).
int launch(int ranks, const std::string& body) {
  const char* source = std::getenv("MONOFLOW_SOURCE_DIR");
  const std::string root = source ? source : ".";
  const std::string command = "timeout -k 5 30 " + root + "/scripts/launch.sh " + std::to_string(ranks) +
                              " sh -c '" + body + "' 2>/dev/null";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Ranks that fail together can be reaped by the shell's job control before the launcher waits
// for them; it once answered that with "no such job" in a loop, for ever. Repeated, because
// whether the ranks end before the wait is a race.
TEST(LaunchScript, RanksThatAllFailAtOnceEndTheLauncherWithTheirStatus) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    ASSERT_EQ(launch(8, "exit 3"), 3) << "attempt " << attempt;
  }
}

TEST(LaunchScript, OneFailingRankStopsTheOthersAndItsStatusIsTheLaunchers) {
  // Ranks other than 2 would sleep 20 s; the launcher's SIGTERM ends them (sh dies of it).
  EXPECT_EQ(launch(4, "[ \"$RANK\" = 2 ] && exit 5; exec sleep 20"), 5);
}

TEST(LaunchScript, EveryRankSeesItsEnvironmentAndSuccessIsZero) {
  // Each rank exits 0 only when RANK, LOCAL_RANK and WORLD_SIZE are what torchrun would set.
  EXPECT_EQ(launch(3, "[ \"$WORLD_SIZE\" = 3 ] && [ \"$RANK\" = \"$LOCAL_RANK\" ] && [ \"$RANK\" -lt 3 ]"), 0);
}

}  // namespace
