// Official Glow-TTS checkpoints in and out (#12 items 3 and 4), on the CPU with the tiny model:
// train --init-from (an official G_*.pth or a monoflow checkpoint: weights only, a new run from
// step 0), synthesize with an official checkpoint and a config, convert_weights --to-official
// read back by Python's torch.load, and the messages for a file of the wrong kind. The official
// files are written by the official saving code (scripts/models/official_checkpoint.py).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "../models/official_files.h"
#include "common/error.h"
#include "models/glow_tts.h"
#include "models/interop/weights.h"
#include "test_util.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/rng_state.h"
#include "train/signals.h"
#include "infer/synthesis.h"
#include "train/trainer.h"
#include "weights_util.h"

namespace monoflow::train {
namespace {

using testing::error_of;
using testing::TempDir;

// One corpus for the whole suite.
const std::string& corpus() { return testing::suite_corpus(); }

RunSummary run(const Config& c, const std::string& init_from, const std::string& resume = "") {
  RunOptions o;
  o.init_from = init_from;
  o.resume = resume;
  return testing::run_with(c, o);
}

// The steps of metrics.jsonl's training lines, and whether each loss was finite.
std::set<int64_t> logged_steps(const std::string& run_dir, bool* all_finite) {
  std::set<int64_t> steps;
  *all_finite = true;
  std::istringstream in(testing::read_text(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const YAML::Node n = YAML::Load(line);
    if (!n["loss/mle"]) continue;
    steps.insert(n["step"].as<int64_t>());
    *all_finite = *all_finite && std::isfinite(n["loss/mle"].as<double>());
  }
  return steps;
}

// Every parameter of the model equal, bit for bit, to `expected` (and every one present).
void expect_weights(models::GlowTTS& model, const official_files::Tensors& expected) {
  const auto params = model->named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (const auto& [key, t] : expected) {
    ASSERT_TRUE(params.contains(key)) << key;
    EXPECT_TRUE(torch::equal(params[key], t)) << key;
  }
}

// A learning rate so small that Adam's updates vanish in float32: what a run ends with is what
// it started from, so the test sees the weights --init-from loaded.
const std::vector<std::string> kFrozen = {"train.learning_rate=1e-30"};

// Official files for the tiny config's model, made once (G_1.pth, G_1_legacy.pth, ddi_G.pth).
class OfficialIn : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    python_ = new std::string(official_files::python_with_torch());
    if (python_->empty()) return;
    const Config c = testing::tiny_config(corpus(), *dir_ / "unused", 1);
    models::GlowTTS model = testing::tiny_model(c);
    error_ = new std::string(official_files::make_official_checkpoints(*python_, models::state_dict(*model), dir_->path()));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (python_->empty()) GTEST_SKIP() << "no Python with torch and numpy (MONOFLOW_PYTHON)";
    ASSERT_TRUE(error_->empty()) << *error_;
  }
  static std::string path(const std::string& name) { return *dir_ / name; }

  static TempDir* dir_;
  static std::string* python_;
  static std::string* error_;
};
TempDir* OfficialIn::dir_ = nullptr;
std::string* OfficialIn::python_ = nullptr;
std::string* OfficialIn::error_ = nullptr;

TEST_F(OfficialIn, InitFromAnOfficialCheckpointStartsANewRunFromItsWeights) {
  TempDir dir;
  for (const char* file : {"G_1.pth", "ddi_G.pth"}) {
    SCOPED_TRACE(file);
    const std::string run_dir = dir / (std::string("from_") + file);
    const Config c = testing::tiny_config(corpus(), run_dir, 2, kFrozen);
    const RunSummary s = run(c, path(file));
    EXPECT_EQ(s.step, 2);  // from step 0, not the file's iteration
    bool finite = false;
    EXPECT_EQ(logged_steps(run_dir, &finite), (std::set<int64_t>{1, 2}));
    EXPECT_TRUE(finite);
    models::GlowTTS trained = testing::load_weights(c, s.checkpoint);
    // No DDI (it would have moved the ActNorms) and the file's weights throughout.
    expect_weights(trained, official_files::read_values(path(std::string(file) + ".values")));
  }
}

TEST_F(OfficialIn, InitFromAMonoflowCheckpointTakesItsWeightsOnly) {
  TempDir dir;
  const RunSummary a = run(testing::tiny_config(corpus(), dir / "a", 2), "");
  const Config c = testing::tiny_config(corpus(), dir / "b", 1, kFrozen);
  const RunSummary b = run(c, a.checkpoint);
  EXPECT_EQ(b.step, 1);
  bool finite = false;
  EXPECT_EQ(logged_steps(dir / "b", &finite), (std::set<int64_t>{1}));
  models::GlowTTS wa = testing::load_weights(c, a.checkpoint), wb = testing::load_weights(c, b.checkpoint);
  testing::expect_same_weights(wa, wb);
}

TEST_F(OfficialIn, WrongUsesAreRefusedNamingTheFile) {
  TempDir dir;
  const std::string g1 = path("G_1.pth");
  const Config c = testing::tiny_config(corpus(), dir / "run", 1);
  EXPECT_NE(error_of([&] { run(c, g1, "latest"); }).find("--init-from and --resume exclude each other"),
            std::string::npos);
  const std::string missing = error_of([&] { run(c, dir / "none.pth"); });
  EXPECT_NE(missing.find(dir / "none.pth"), std::string::npos) << missing;
  EXPECT_NE(missing.find("no such file"), std::string::npos) << missing;
  std::ofstream(dir / "junk.pth") << "junk";
  const std::string junk = error_of([&] { run(c, dir / "junk.pth"); });
  EXPECT_NE(junk.find("corrupt or not a checkpoint"), std::string::npos) << junk;
  // An official file for another model size: the keys that do not fit are named.
  const std::string other = error_of([&] {
    run(testing::tiny_config(corpus(), dir / "other", 1, {"model.hidden_channels=24", "model.hidden_channels_enc=24"}),
        g1);
  });
  EXPECT_NE(other.find("weights do not fit"), std::string::npos) << other;
  EXPECT_NE(other.find("encoder.emb.weight"), std::string::npos) << other;
  // --init-from is a new run: a directory that holds one is not overwritten.
  run(c, g1);
  EXPECT_NE(error_of([&] { run(c, g1); }).find("holds a run already"), std::string::npos);
  // --resume with an official file: what it is and what reads it, never "delete".
  const std::string resume = error_of([&] { run(c, "", g1); });
  EXPECT_NE(resume.find(g1 + ": is a Python torch.save file"), std::string::npos) << resume;
  EXPECT_NE(resume.find("--init-from"), std::string::npos) << resume;
  for (const std::string& message : {missing, junk, other, resume}) {
    EXPECT_EQ(message.find("delete"), std::string::npos) << message;
  }
}

TEST_F(OfficialIn, SynthesizeSpeaksWithAnOfficialCheckpointGivenAConfig) {
  TempDir dir;
  std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(corpus(), dir / "run", 1);
  SynthesisOptions o;
  o.checkpoint = path("G_1.pth");
  o.text = "hello world.";
  o.device = "cpu";
  o.griffin_lim_iterations = 2;
  const std::string no_config = error_of([&] { synthesize(o); });
  EXPECT_NE(no_config.find("--config"), std::string::npos) << no_config;
  o.config = dir / "tiny.yaml";
  const SynthesisResult r = synthesize(o);
  EXPECT_EQ(r.step, 1);  // the official iteration
  EXPECT_GT(r.audio.numel(), 0);
  EXPECT_EQ(r.mel.size(0), 80);
  // The tool: the same from the command line.
  int status = 0;
  const std::string out = testing::run_command(std::string(MONOFLOW_SYNTHESIZE_EXE) + " --checkpoint " + o.checkpoint +
                                                   " --config " + o.config + " --text 'hello world.' --device cpu" +
                                                   " --griffin-lim-iters 2 -o " + (dir / "out.wav") + " 2>&1",
                                               &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir / "out.wav")) << out;
}

// A monoflow checkpoint of the tiny config (untrained weights, as train writes it).
std::string monoflow_checkpoint(const TempDir& dir, Config* config) {
  *config = testing::tiny_config(corpus(), dir / "run", 1);
  torch::manual_seed(17);
  models::GlowTTS model = testing::tiny_model(*config);
  torch::optim::Adam adam(model->parameters());
  CheckpointState s;
  s.step = 42;  // epoch 5 (0-based 4) at batch 2 of 10: 4 epochs completed
  s.epoch = 4;
  s.loader_position = "4 2";
  s.scheduler = config->train.scheduler;
  s.config_yaml = to_yaml(*config);
  s.rng = capture_rng();
  const std::string path = dir / "ckpt_000000042.pt";
  save_checkpoint(path, *model, adam, s);
  return path;
}

TEST_F(OfficialIn, ConvertWeightsToOfficialWritesWhatTorchLoadReads) {
  TempDir dir;
  Config c;
  const std::string ckpt = monoflow_checkpoint(dir, &c);
  const std::string exe = MONOFLOW_CONVERT_WEIGHTS_EXE;
  int status = 0;
  for (const bool as_checkpoint : {false, true}) {
    SCOPED_TRACE(as_checkpoint);
    const std::string out = dir / (as_checkpoint ? "G_42.pth" : "sd.pth");
    std::string log = testing::run_command(exe + " --to-official " + ckpt + " " + out + (as_checkpoint ? " --checkpoint" : "") +
                                               " 2>&1", &status);
    ASSERT_EQ(WEXITSTATUS(status), 0) << log;
    // torch.load with its default weights_only=True, as a user of the official code would.
    std::ofstream(dir / "dump.py")
        << "import sys, torch\n"
           "d = torch.load(sys.argv[1])\n"
           "sd = d['model'] if 'model' in d else d\n"
           "if 'model' in d: print('meta', d['iteration'], float(d['learning_rate']).hex())\n"
           "for k, t in sd.items():\n"
           "    print(k, str(t.dtype), 'x'.join(map(str, t.shape)), t.contiguous().numpy().tobytes().hex())\n";
    log = testing::run_command(*python_ + " " + (dir / "dump.py") + " " + out + " 2>&1", &status);
    ASSERT_EQ(WEXITSTATUS(status), 0) << log;
    const auto ours = read_checkpoint_weights(ckpt);
    std::istringstream lines(log);
    std::string key, dtype, shape, hex;
    if (as_checkpoint) {
      int64_t iteration = 0;
      std::string lr;
      lines >> key >> iteration >> lr;
      EXPECT_EQ(key, "meta");
      EXPECT_EQ(iteration, 4);  // the official train.py reads an epoch count: resumes at epoch 5, not 43
      EXPECT_EQ(std::strtod(lr.c_str(), nullptr), c.train.learning_rate);
    }
    size_t i = 0;
    for (; lines >> key >> dtype >> shape >> hex; ++i) {
      ASSERT_LT(i, ours.size()) << key;
      EXPECT_EQ(key, ours[i].first);  // the same keys in the same (the official) order
      EXPECT_EQ(dtype, "torch.float32") << key;
      const torch::Tensor t = ours[i].second.contiguous();
      std::ostringstream expected;
      const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
      for (int64_t b = 0; b < t.numel() * 4; ++b) {
        expected << "0123456789abcdef"[bytes[b] >> 4] << "0123456789abcdef"[bytes[b] & 15];
      }
      EXPECT_EQ(hex, expected.str()) << key;  // exact values
    }
    EXPECT_EQ(i, ours.size());
  }
  // The wrong direction for each kind of file: what to run instead.
  std::string log = testing::run_command(exe + " " + ckpt + " 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("--to-official"), std::string::npos) << log;
  log = testing::run_command(exe + " --to-official " + path("G_1.pth") + " " + (dir / "x.pth") + " 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("official format) already"), std::string::npos) << log;
}

}  // namespace
}  // namespace monoflow::train
