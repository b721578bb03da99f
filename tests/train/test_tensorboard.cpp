// Writes an event file and reads it back with the Python tensorboard package.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "test_util.h"
#include "train/log/image.h"
#include "train/log/tensorboard.h"
#include "train/wav.h"

namespace monoflow::train {
namespace {

using testing::TempDir;

YAML::Node read_back(const std::string& dir) {
  int status = 0;
  // stderr apart: the tensorboard package logs warnings there (e.g. when it purges a dead run's
  // steps), which would break the JSON on stdout.
  const std::string err = dir + ".stderr";
  const std::string cmd = std::string(MONOFLOW_TEST_PYTHON) + " " + MONOFLOW_TEST_DIR +
                          "/read_events.py " + dir + " 2>" + err;
  const std::string out = testing::run_command(cmd, &status);
  EXPECT_EQ(status, 0) << out << testing::read_text(err);
  return YAML::Load(out);
}

TEST(TensorBoard, PythonReaderSeesScalarsImagesAndAudio) {
  TempDir dir;
  const std::string logdir = dir / "tb";
  const torch::Tensor align = torch::eye(6).index({torch::indexing::Slice(), torch::indexing::Slice()}).repeat_interleave(2, 1);
  const Png png = render_heatmap(align);
  const torch::Tensor wave = torch::sin(torch::arange(2205, torch::kFloat32) * (2 * M_PI * 440 / 22050)) * 0.5;
  const std::string wav = encode_wav16(wave, 22050);
  {
    EventWriter w(logdir);
    w.scalar("loss/mle", 1.25, 1);
    w.scalar("loss/mle", 0.5, 2);
    w.scalar("loss/mle", -0.75, 30);
    w.scalar("lr", 3.5e-4, 30);
    w.image("align/val", png.bytes, png.height, png.width, png.channels, 30);
    w.audio("audio/val", wav, 22050, wave.numel(), 30);
    w.flush();
  }
  const YAML::Node r = read_back(logdir);
  ASSERT_TRUE(r["scalars"]) << "reader output not parsed";
  const YAML::Node mle = r["scalars"]["loss/mle"];
  ASSERT_EQ(mle.size(), 3u);
  EXPECT_EQ(mle[0][0].as<int>(), 1);
  EXPECT_EQ(mle[0][1].as<double>(), 1.25);
  EXPECT_EQ(mle[1][0].as<int>(), 2);
  EXPECT_EQ(mle[1][1].as<double>(), 0.5);
  EXPECT_EQ(mle[2][0].as<int>(), 30);
  EXPECT_EQ(mle[2][1].as<double>(), -0.75);
  EXPECT_FLOAT_EQ(r["scalars"]["lr"][0][1].as<float>(), 3.5e-4f);

  const YAML::Node img = r["images"]["align/val"];
  ASSERT_EQ(img.size(), 1u);
  EXPECT_EQ(img[0]["step"].as<int>(), 30);
  EXPECT_EQ(img[0]["width"].as<int>(), 12);
  EXPECT_EQ(img[0]["height"].as<int>(), 6);
  EXPECT_EQ(testing::read_text(img[0]["file"].as<std::string>()), png.bytes);

  const YAML::Node audio = r["audio"]["audio/val"];
  ASSERT_EQ(audio.size(), 1u);
  EXPECT_EQ(audio[0]["sample_rate"].as<double>(), 22050.0);
  EXPECT_EQ(audio[0]["frames"].as<int>(), 2205);
  EXPECT_EQ(audio[0]["content_type"].as<std::string>(), "audio/wav");
  EXPECT_EQ(testing::read_text(audio[0]["file"].as<std::string>()), wav);
}

// A run killed after logging steps 1-10 (a validation value at step 8) resumes from its step-5
// checkpoint: TensorBoard must not show the dead run's steps 6-10 next to the new ones. The
// validation tag is the discriminating one: no later step of the new run replaces it.
TEST(TensorBoard, AResumedRunPurgesTheStepsPastItsCheckpoint) {
  TempDir dir;
  const std::string logdir = dir / "tb";
  {
    EventWriter w(logdir);
    for (int step = 1; step <= 10; ++step) w.scalar("loss/mle", step, step);
    w.scalar("val/mle", 42.0, 8);
    w.flush();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a new file, as a new process makes
  {
    EventWriter w(logdir);
    w.purge_from(6);
    for (int step = 6; step <= 7; ++step) w.scalar("loss/mle", 100 + step, step);
    w.flush();
  }
  const YAML::Node r = read_back(logdir);
  ASSERT_TRUE(r["scalars"]) << "reader output not parsed";
  const YAML::Node mle = r["scalars"]["loss/mle"];
  ASSERT_EQ(mle.size(), 7u);
  EXPECT_EQ(mle[4][1].as<double>(), 5.0);  // the old run up to its checkpoint
  EXPECT_EQ(mle[5][0].as<int>(), 6);
  EXPECT_EQ(mle[5][1].as<double>(), 106.0);  // then the resumed run
  EXPECT_FALSE(r["scalars"]["val/mle"] && r["scalars"]["val/mle"].size() > 0) << "stale step-8 value kept";
}

}  // namespace
}  // namespace monoflow::train
