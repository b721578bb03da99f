// The inference benchmark's procedure (tools/bench/infer_bench.h) on the CPU with the quick-start
// model and a shorter sentence: the length scale it sets gives the asked-for length, and every
// timed call is counted. (The figures themselves come from the GPU machine.)
#include <gtest/gtest.h>

#include "common/error.h"
#include "train/config/config_io.h"
#include "bench/infer_bench.h"

namespace monoflow::train {
namespace {

InferBenchOptions small_run(int frames) {
  InferBenchOptions o;
  o.setup.config = load_config(std::string(MONOFLOW_TEST_DIR) + "/../../configs/quickstart.yaml");
  o.setup.warmup = 1;
  o.setup.timed = 3;
  o.symbols = 24;
  o.target_frames = frames;
  return o;
}

TEST(InferBench, SetsTheLengthScaleForTheTargetLengthAndTimesTheCalls) {
  const auto row = bench_inference(small_run(240), "fp32");
  EXPECT_EQ(row.precision, "fp32");
  EXPECT_EQ(row.symbols, 24);
  // Within what the duration rule allows: whole frames per token (24) and a multiple of n_sqz.
  EXPECT_NEAR(row.frames, 240, 26);
  EXPECT_GT(row.length_scale, 0.0);
  EXPECT_GT(row.ms, 0.0);
  EXPECT_LE(row.ms_min, row.ms);
  EXPECT_LE(row.ms, row.ms_p90);
  EXPECT_LE(row.ms_p90, row.ms_max);
  EXPECT_NEAR(row.frames_per_s, 1000.0 * row.frames / row.ms, 1e-6 * row.frames_per_s);

  // Twice the target: about twice the frames, from a larger length scale.
  const auto longer = bench_inference(small_run(480), "fp32");
  EXPECT_NEAR(longer.frames, 480, 26);
  EXPECT_GT(longer.length_scale, row.length_scale);
}

// --batch: the sentence three times at once; the frames are per utterance, frames/s counts all.
TEST(InferBench, ABatchRunsTheSentenceManyTimesAtOnce) {
  InferBenchOptions o = small_run(240);
  const auto one = bench_inference(o, "fp32");
  o.batch = 3;
  const auto three = bench_inference(o, "fp32");
  EXPECT_EQ(three.batch, 3);
  // The length scale puts a token's duration right at a ceil step (that is how the bisection
  // finds it), where the batch's rounding may move it by a frame: n_sqz either way.
  EXPECT_NEAR(three.frames, one.frames, 2);
  EXPECT_DOUBLE_EQ(three.length_scale, one.length_scale);
  EXPECT_NEAR(three.frames_per_s, 3000.0 * three.frames / three.ms, 1e-6 * three.frames_per_s);
  EXPECT_EQ(infer_csv_row(three).back(), '3');
  o.batch = 0;
  EXPECT_THROW(bench_inference(o, "fp32"), UserError);
}

TEST(InferBench, RejectsAnUnknownPrecision) {
  EXPECT_THROW(bench_inference(small_run(100), "fp8"), UserError);
}

}  // namespace
}  // namespace monoflow::train
