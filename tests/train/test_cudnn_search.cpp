// When a graphed shape gets cuDNN's algorithm search (src/train/cudnn_search.h): the schedule on
// the CPU; the graphed step that follows it is in test_graphed_step.cpp (GraphedStepCuda).
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "train/cudnn_search.h"

namespace monoflow::train {
namespace {

TEST(CudnnSearch, AutoSearchesTheFirstShapeAtOnceToMeasureWhatASearchCosts) {
  const SearchSchedule schedule(CudnnSearch::kAuto);
  EXPECT_TRUE(schedule.search_now(0.0));
}

TEST(CudnnSearch, AutoSearchesAShapeOnceItsReplaysHaveCostTheLastSearch) {
  SearchSchedule schedule(CudnnSearch::kAuto);
  schedule.searched(750.0);
  EXPECT_FALSE(schedule.search_now(0.0));
  EXPECT_FALSE(schedule.search_now(749.9));
  EXPECT_TRUE(schedule.search_now(750.0));
  schedule.searched(300.0);  // the last search sets the price, not the first
  EXPECT_FALSE(schedule.search_now(299.0));
  EXPECT_TRUE(schedule.search_now(300.0));
}

TEST(CudnnSearch, AlwaysAndNeverIgnoreTheReplays) {
  SearchSchedule always(CudnnSearch::kAlways), never(CudnnSearch::kNever);
  always.searched(1000.0);
  never.searched(1.0);
  EXPECT_TRUE(always.search_now(0.0));
  EXPECT_FALSE(never.search_now(0.0));
  EXPECT_FALSE(never.search_now(1e9));
}

TEST(CudnnSearch, ParsesTheConfigValuesAndNamesABadOne) {
  EXPECT_EQ(parse_cudnn_search("auto"), CudnnSearch::kAuto);
  EXPECT_EQ(parse_cudnn_search("always"), CudnnSearch::kAlways);
  EXPECT_EQ(parse_cudnn_search("never"), CudnnSearch::kNever);
  try {
    parse_cudnn_search("Always");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'Always'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace monoflow::train
