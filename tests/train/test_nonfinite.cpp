// NonfiniteSteps (src/train/nonfinite.h), the trainer's policy for non-finite losses on its own:
// the warnings' exact text, the count a resumed run carries on, and the stop at
// train.max_nonfinite_steps in a row (eager) or in the device's longest run (graphed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "train/nonfinite.h"

namespace monoflow::train {
namespace {

std::string stop_message(const NonfiniteSteps& n, const std::string& last_checkpoint) {
  try {
    n.stop_at_limit(last_checkpoint);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(NonfiniteSteps, EagerSkipsCountOnFromAResumedRunAndStopAtTheLimitInARow) {
  NonfiniteSteps n(3, 5);  // a resumed run that skipped 5 before
  EXPECT_EQ(n.eager_skip(41, 2, 7, {"a_01", "b_02"}),
            "warning: non-finite loss at step 41 (epoch 3, batch 7; utterances a_01, b_02): update skipped (1 in a "
            "row, 6 in total)");
  EXPECT_EQ(stop_message(n, ""), "");
  n.finite();  // a finite step ends the run of them
  n.eager_skip(43, 2, 9, {"c"});
  n.eager_skip(44, 2, 10, {"d"});
  EXPECT_EQ(stop_message(n, ""), "");
  EXPECT_EQ(n.eager_skip(45, 2, 11, {"e"}),
            "warning: non-finite loss at step 45 (epoch 3, batch 11; utterances e): update skipped (3 in a row, 9 in "
            "total)");
  EXPECT_EQ(n.skipped(), 9);
  EXPECT_EQ(stop_message(n, "runs/x/checkpoints/ckpt_000000040.pt"),
            "training stopped: the loss was non-finite for 3 steps in a row (train.max_nonfinite_steps); lower "
            "train.learning_rate, check the data, or resume from an earlier checkpoint (last: "
            "runs/x/checkpoints/ckpt_000000040.pt)");
}

TEST(NonfiniteSteps, EagerWarningNamesTheFirstEightUtterancesAndHowManyInAll) {
  NonfiniteSteps n(100, 0);
  std::vector<std::string> ids;
  for (int i = 1; i <= 10; ++i) ids.push_back("u" + std::to_string(i));
  EXPECT_EQ(n.eager_skip(1, 0, 0, ids),
            "warning: non-finite loss at step 1 (epoch 1, batch 0; utterances u1, u2, u3, u4, u5, u6, u7, u8, ... (10 "
            "in all)): update skipped (1 in a row, 1 in total)");
}

TEST(NonfiniteSteps, DeviceCountsSayOnlyNewSkipsAndStopAtTheLongestRun) {
  NonfiniteSteps n(4, 2);
  GraphStatus s;
  s.skipped = 2;
  s.longest_nonfinite_run = 1;
  EXPECT_EQ(n.device_counts(s, 100), "");  // nothing new since the resumed count
  s.skipped = 5;
  s.longest_nonfinite_run = 3;
  EXPECT_EQ(n.device_counts(s, 120), "warning: 3 update(s) skipped for a non-finite loss by step 120 (5 in total)");
  EXPECT_EQ(n.skipped(), 5);
  EXPECT_EQ(stop_message(n, ""), "");
  s.skipped = 6;
  s.longest_nonfinite_run = 4;
  n.device_counts(s, 140);
  EXPECT_EQ(stop_message(n, ""),
            "training stopped: the loss was non-finite for 4 steps in a row (train.max_nonfinite_steps); lower "
            "train.learning_rate, check the data, or resume from an earlier checkpoint");
}

}  // namespace
}  // namespace monoflow::train
