// Which checkpoint --resume takes (issue #13): past a damaged newest one to the newest sound
// one, keeping the damaged file; an explicit damaged PATH stops; going back to an older PATH
// while newer checkpoints are there stops, naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "data/manifest.h"
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

// metadata.csv of `corpus` without its line `drop` (0-based).
void drop_line(const std::string& corpus, int drop) {
  std::istringstream in(testing::read_text(corpus + "/metadata.csv"));
  std::string kept;
  int i = 0;
  for (std::string line; std::getline(in, line); ++i)
    if (i != drop) kept += line + "\n";
  std::ofstream(corpus + "/metadata.csv", std::ios::trunc) << kept;
}

// The seeded split's validation ids of the corpus as it is now (the data library's split).
std::vector<std::string> validation_ids(const Config& c) {
  data::BadLines bad("error");
  const auto split = data::seeded_split(data::read_ljspeech(c.data.dataset_dir, bad), c.data.validation_size,
                                        c.data.split_seed);
  std::vector<std::string> ids;
  for (const auto& u : split.second) ids.push_back(u.id);
  return ids;
}

// A quiet=false run (the config note is a normal line) whose stderr is returned.
std::string resume_saying(const Config& c) {
  RunOptions o;
  o.resume = "latest";
  o.config_yaml = to_yaml(c);
  clear_stop_request();
  ::testing::internal::CaptureStderr();
  train(c, o);
  return ::testing::internal::GetCapturedStderr();
}

// --resume after a line of metadata.csv went (a user removing a broken utterance): the seeded
// split then draws another validation set. The run goes on, and says what changed: the config
// keys with both values, the training set's size, the validation ids that left and joined, and
// metrics.jsonl records the validation change at the step where the curve breaks.
TEST(Resume, AChangedDatasetOrConfigIsNamedAndAChangedValidationSetRecorded) {
  TempDir dir;
  const std::string corpus = dir / "corpus", run_dir = dir / "run";
  testing::write_tiny_corpus(corpus);
  const auto make = [&](int steps, const std::vector<std::string>& more = {}) {
    std::vector<std::string> o{"train.val_interval=0", "train.checkpoint_interval=1"};
    o.insert(o.end(), more.begin(), more.end());
    return testing::tiny_config(corpus, run_dir, steps, o);
  };
  run(make(2));

  // The same data and another learning rate: the key is named, the data is not mentioned.
  const std::string same = resume_saying(make(3, {"train.learning_rate=0.5"}));
  EXPECT_NE(same.find("note: the config differs from the one the checkpoint was trained with in "
                      "train.learning_rate (1.0 -> 0.5), train.max_steps (2 -> 3) (its snapshot is in"),
            std::string::npos) << same;
  EXPECT_EQ(same.find("set differs"), std::string::npos) << same;

  // Drop the first line whose removal moves the validation set (the split is seeded, so which
  // one is fixed; the test checks that there is one).
  const std::vector<std::string> before = validation_ids(make(4));
  std::vector<std::string> after;
  const std::string original = testing::read_text(corpus + "/metadata.csv");
  for (int drop = 0; drop < 10 && (after.empty() || after == before); ++drop) {
    std::ofstream(corpus + "/metadata.csv", std::ios::trunc) << original;
    drop_line(corpus, drop);
    after = validation_ids(make(4));
  }
  ASSERT_NE(after, before) << "no single line's removal moved the validation set";
  std::vector<std::string> left, joined;
  for (const auto& id : before)
    if (std::find(after.begin(), after.end(), id) == after.end()) left.push_back(id);
  for (const auto& id : after)
    if (std::find(before.begin(), before.end(), id) == before.end()) joined.push_back(id);
  ASSERT_EQ(left.size(), joined.size());  // validation_size stays 2

  const std::string said = resume_saying(make(4));
  const auto join = [](const std::vector<std::string>& ids) {
    std::string s;
    for (const auto& id : ids) s += (s.empty() ? "" : ", ") + id;
    return s;
  };
  EXPECT_NE(said.find("warning: --resume: the training set differs from the checkpoint's: 8 -> 7 utterances; "
                      "training goes on with the current one"),
            std::string::npos) << said;
  const std::string change = "2 -> 2 utterances; left it: " + join(left) + "; joined it: " + join(joined);
  EXPECT_NE(said.find("warning: --resume: the validation set differs from the checkpoint's: " + change +
                      "; validation losses from step 4 on are not comparable with earlier ones (recorded in "
                      "metrics.jsonl)"),
            std::string::npos) << said;
  const std::string metrics = testing::read_text(run_dir + "/metrics.jsonl");
  EXPECT_NE(metrics.find("{\"step\":3,\"event\":\"validation set changed\",\"change\":\"" + change +
                         "\",\"checkpoint\":\"" + run_dir + "/checkpoints/" + checkpoint_filename(3) + "\"}"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find("{\"step\":3,\"event\":\"training set changed\",\"change\":\"8 -> 7 utterances\""),
            std::string::npos) << metrics;
}

}  // namespace
}  // namespace monoflow::train
