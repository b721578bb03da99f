// Which checkpoint --resume takes (issue #13): past a damaged newest one to the newest sound
// one, keeping the damaged file; an explicit damaged PATH stops; going back to an older PATH
// while newer checkpoints are there stops, naming them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "test_util.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/signals.h"
#include "train/trainer.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::run;

// A checkpoint every step, so that a few steps make the files the tests need.
Config config(const std::string& run_dir, int steps) {
  return testing::tiny_config(testing::suite_corpus(), run_dir, steps,
                              {"train.val_interval=0", "train.checkpoint_interval=1"});
}

// One bit of a record's data flipped (in the config snapshot, whose text is findable; the
// zip headers' padding is not covered by the CRC): a sound-looking file that fails its CRC.
void damage(const std::string& path) {
  std::string bytes = testing::read_text(path);
  const size_t at = bytes.find("max_nonfinite_steps");
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Resume, PassesADamagedNewestCheckpointKeepsItAndTrainsExactlyFromThePreviousOne) {
  TempDir dir;
  const std::string run_dir = dir / "run", ckpts = run_dir + "/checkpoints";
  const RunSummary straight = run(config(dir / "straight", 3));
  run(config(run_dir, 2));  // checkpoints at 1 and 2
  const std::string newest = ckpts + "/" + checkpoint_filename(2);
  damage(newest);
  const std::string damaged_bytes = testing::read_text(newest);

  ::testing::internal::CaptureStderr();
  const RunSummary resumed = run(config(run_dir, 3), "latest");
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(resumed.step, 3);
  // Said even when quiet: which file, why, where it went, and what the run took instead.
  EXPECT_NE(said.find("warning: --resume: " + newest + ": corrupt file: record '"), std::string::npos) << said;
  EXPECT_NE(said.find("fails its CRC-32 check"), std::string::npos) << said;
  EXPECT_NE(said.find("kept as " + newest + ".damaged; resuming from the newest sound checkpoint, " + ckpts + "/" +
                      checkpoint_filename(1)), std::string::npos) << said;
  // Kept byte for byte, out of --resume's and pruning's way; the new step-2 checkpoint is sound.
  EXPECT_TRUE(testing::read_text(newest + ".damaged") == damaged_bytes);
  EXPECT_EQ(read_checkpoint_state(newest).step, 2);
  // Steps 2 and 3 again, exactly as the uninterrupted run made them.
  const auto a = read_checkpoint_weights(straight.checkpoint), b = read_checkpoint_weights(resumed.checkpoint);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

TEST(Resume, AnExplicitDamagedPathOrOnlyDamagedCheckpointsStop) {
  TempDir dir;
  const std::string run_dir = dir / "run", ckpts = run_dir + "/checkpoints";
  run(config(run_dir, 1));  // one checkpoint, at 1
  const std::string only = ckpts + "/" + checkpoint_filename(1);
  damage(only);
  const std::string named = testing::error_of([&] { run(config(run_dir, 2), only); });
  EXPECT_NE(named.find(only + ": corrupt file: record '"), std::string::npos) << named;
  const std::string all = testing::error_of([&] { run(config(run_dir, 2), "latest"); });
  EXPECT_NE(all.find(ckpts + ": --resume: every checkpoint here is damaged, the newest: " + only), std::string::npos)
      << all;
  EXPECT_TRUE(fs::exists(only)) << "nothing moves when the run does not start";
  EXPECT_FALSE(fs::exists(only + ".damaged"));
}

// Back to an older checkpoint: the resumed run would overwrite the newer ones as it reaches
// their steps (and pruning would rank them above its own), so it stops and names them.
TEST(Resume, AnOlderPathWithNewerCheckpointsHereStopsNamingThem) {
  TempDir dir;
  const std::string run_dir = dir / "run", ckpts = run_dir + "/checkpoints";
  run(config(run_dir, 3));  // keep 3: checkpoints at 1, 2, 3
  const std::string older = ckpts + "/" + checkpoint_filename(1);
  const std::string e = testing::error_of([&] { run(config(run_dir, 4), older); });
  EXPECT_NE(e.find("this checkpoint is at step 1, but the run directory holds newer ones (" + ckpts + "/" +
                   checkpoint_filename(2) + ", " + ckpts + "/" + checkpoint_filename(3) + ")"), std::string::npos) << e;
  EXPECT_EQ(list_checkpoints(ckpts).size(), 3u);
  // Moved out of the way, the older one resumes.
  fs::create_directories(dir / "later");
  for (int step : {2, 3}) fs::rename(ckpts + "/" + checkpoint_filename(step), dir / ("later/" + checkpoint_filename(step)));
  EXPECT_EQ(run(config(run_dir, 2), older).step, 2);
}

}  // namespace
}  // namespace monoflow::train
