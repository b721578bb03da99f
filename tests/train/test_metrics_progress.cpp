#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "test_util.h"
#include "train/log/metrics_log.h"
#include "train/log/progress.h"

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
