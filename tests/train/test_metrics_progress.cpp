#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <sstream>

#include "test_util.h"
#include "train/log/metrics_log.h"
#include "train/log/progress.h"
#include "train/run_log.h"

namespace monoflow::train {
namespace {

TEST(MetricsLog, JsonLinesReadBackAndAppend) {
  testing::TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  {
    MetricsLog log(path, false);
    log.write(10, 1, {{"loss/mle", 1.5}, {"lr", 0.1}, {"odd\"key", NAN}});
  }
  {
    MetricsLog log(path, true);
    log.write(20, 2, {{"loss/mle", -0.25}});
  }
  const std::string text = testing::read_text(path);
  EXPECT_EQ(text,
            "{\"step\":10,\"epoch\":1,\"loss/mle\":1.5,\"lr\":0.1,\"odd\\\"key\":null}\n"
            "{\"step\":20,\"epoch\":2,\"loss/mle\":-0.25}\n");
  const YAML::Node first = YAML::Load(text.substr(0, text.find('\n')));
  EXPECT_EQ(first["lr"].as<double>(), 0.1);
  EXPECT_TRUE(first["odd\"key"].IsNull());
}

TEST(MetricsLog, NumbersRoundTrip) {
  for (const double v : {0.1, 1.0 / 3.0, 1e-9, 123456.789, -2.5e300}) {
    EXPECT_EQ(std::strtod(json_number(v).c_str(), nullptr), v) << json_number(v);
  }
  EXPECT_EQ(json_number(INFINITY), "null");
}

TEST(Progress, LineHasEveryField) {
  ProgressInfo p;
  p.step = 250;
  p.total_steps = 1000;
  p.epoch = 3;
  p.loss_mle = 1.23456;
  p.loss_dur = 0.5;
  p.lr = 2.5e-4;
  p.steps_per_s = 5.0;
  p.mas_ms = 12.34;
  EXPECT_EQ(format_progress(p, false),
            "step 250/1000 | epoch 3 | mle 1.2346 dur 0.5000 | lr 2.500e-04 | 5.00 steps/s | "
            "MAS 12.3 ms | ETA 2m30s");
  p.skipped = 2;
  const std::string bar = format_progress(p, true);
  EXPECT_EQ(bar.substr(0, 23), "[#####...............] ");
  EXPECT_NE(bar.find("skipped 2"), std::string::npos);
  // Without --compare-align MAS is not timed, and the line says nothing about it.
  p.mas_ms = 0;
  p.skipped = 0;
  EXPECT_EQ(format_progress(p, false),
            "step 250/1000 | epoch 3 | mle 1.2346 dur 0.5000 | lr 2.500e-04 | 5.00 steps/s | ETA 2m30s");
  // Steps that recorded new CUDA graphs say so (their time is not in the rate).
  p.graphs_recorded = 3;
  p.recording_s = 2.04;
  EXPECT_EQ(format_progress(p, false),
            "step 250/1000 | epoch 3 | mle 1.2346 dur 0.5000 | lr 2.500e-04 | 5.00 steps/s | ETA 2m30s | "
            "3 CUDA graph(s) recorded in 2.0 s");
}

// A log line whose interval recorded new CUDA graphs: metrics.jsonl carries the seconds beside
// the step time (which still counts them), and the progress line names them.
TEST(RunLog, GraphRecordingIsLoggedBesideTheStepTime) {
  testing::TempDir dir;
  RunLog log(/*writes=*/true, /*quiet=*/false, align::Backend::kCpu);
  log.open(dir.path(), /*tensorboard=*/false, /*resuming=*/false, 0);
  log.restart_clock(0);
  ::testing::internal::CaptureStderr();
  StepLine first{5, 1, 1.0, 0.5, 2.0, 1e-3, 0, 100, -1};
  first.graphs_recorded = 2;
  first.recording_s = 0.25;
  log.step_line(first);
  log.step_line(StepLine{10, 1, 0.9, 0.4, 1.5, 1e-3, 0, 100, -1});
  log.finish();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("2 CUDA graph(s) recorded in 0.2 s"), std::string::npos) << said;
  std::vector<YAML::Node> lines;
  std::istringstream in(testing::read_text(dir / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) lines.push_back(YAML::Load(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["time/graph_recording_s"].as<double>(), 0.25);
  EXPECT_TRUE(lines[0]["time/step_ms"]);
  EXPECT_FALSE(lines[1]["time/graph_recording_s"]) << "only lines whose interval recorded a graph";
}

TEST(Progress, EtaRespectsTheTimeLimit) {
  ProgressInfo p;
  p.step = 250;
  p.total_steps = 1000;
  p.steps_per_s = 5.0;  // 150 s of steps left
  p.seconds_left = 42;  // but --max-minutes ends the run sooner
  EXPECT_NE(format_progress(p, false).find("ETA 42s"), std::string::npos);
  p.seconds_left = 600;  // the steps end it first
  EXPECT_NE(format_progress(p, false).find("ETA 2m30s"), std::string::npos);
  p.total_steps = 0;  // no step limit known: the time limit alone
  EXPECT_NE(format_progress(p, false).find("ETA 10m00s"), std::string::npos);
}

TEST(Progress, Eta) {
  EXPECT_EQ(format_eta(42.2), "42s");
  EXPECT_EQ(format_eta(185), "3m05s");
  EXPECT_EQ(format_eta(3720), "1h02m");
  EXPECT_EQ(format_eta(NAN), "?");
}

}  // namespace
}  // namespace monoflow::train
