#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "train/lr_schedule.h"

namespace monoflow::train {

TEST(Noam, MatchesTheOfficialFormula) {
  const LrSchedule s("noam", 1.0, 192, 4000);
  // Warm-up: linear in step. 1 * 192^-0.5 * 1 * 4000^-1.5
  EXPECT_DOUBLE_EQ(s.lr(1), std::pow(192.0, -0.5) * std::pow(4000.0, -1.5));
  EXPECT_DOUBLE_EQ(s.lr(100), std::pow(192.0, -0.5) * 100 * std::pow(4000.0, -1.5));
  // The peak at the warm-up boundary: both branches equal.
  EXPECT_NEAR(s.lr(4000), std::pow(192.0, -0.5) * std::pow(4000.0, -0.5), 1e-15);
  EXPECT_NEAR(s.lr(4000), 0.0011410886614690296, 1e-15);
  // Decay: inverse square root.
  EXPECT_DOUBLE_EQ(s.lr(16000), std::pow(192.0, -0.5) * std::pow(16000.0, -0.5));
  EXPECT_LT(s.lr(3999), s.lr(4000));
  EXPECT_LT(s.lr(4001), s.lr(4000));
}

TEST(Noam, ScalesWithLearningRateAndConstantIsFlat) {
  const LrSchedule a("noam", 1.0, 192, 4000), b("noam", 2.0, 192, 4000);
  EXPECT_DOUBLE_EQ(b.lr(1234), 2.0 * a.lr(1234));
  const LrSchedule c("constant", 3e-4, 192, 4000);
  EXPECT_EQ(c.lr(1), 3e-4);
  EXPECT_EQ(c.lr(100000), 3e-4);
}

TEST(Noam, UnknownScheduleIsAUserError) {
  try {
    LrSchedule("cosine", 1.0, 192, 4000);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("train.scheduler"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cosine"), std::string::npos) << e.what();
  }
}

}  // namespace monoflow::train
