// synthesize's bounds: a text with nothing to say, the length scale's range, the frame budget
// (checked before the decoder runs), a very short output; through the library and the tool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "common/error.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "test_util.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "train/rng_state.h"
#include "train/synth/synthesis.h"

namespace monoflow::train {
namespace {

using testing::error_of;
using testing::TempDir;

// An untrained tiny model's checkpoint (synthesis needs only its weights and config snapshot);
// with speakers > 1 a multi-speaker model.
std::string tiny_checkpoint(const TempDir& dir, int speakers = 0) {
  Config c = testing::tiny_config(dir / "corpus", dir / "run", 1);
  if (speakers > 1) {
    c.data.n_speakers = speakers;
    c.model.gin_channels(8);
  }
  const text::TextProcessor tp(c.text);
  torch::manual_seed(5);
  models::GlowTTS model(model_options(c, static_cast<int64_t>(tp.vocab_size())));
  torch::optim::Adam adam(model->parameters());
  CheckpointState s;
  s.step = 7;
  s.scheduler = c.train.scheduler;
  s.config_yaml = to_yaml(c);
  s.rng = capture_rng();
  const std::string path = dir / (speakers > 1 ? "multi_ckpt_000000007.pt" : "ckpt_000000007.pt");
  save_checkpoint(path, *model, adam, s);
  return path;
}

class Synthesis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    checkpoint_ = new std::string(tiny_checkpoint(*dir_));
  }
  static void TearDownTestSuite() {
    delete checkpoint_;
    delete dir_;
  }
  static SynthesisOptions options(const std::string& text) {
    SynthesisOptions o;
    o.checkpoint = *checkpoint_;
    o.text = text;
    o.device = "cpu";
    o.griffin_lim_iterations = 2;
    return o;
  }
  static TempDir* dir_;
  static std::string* checkpoint_;
};
TempDir* Synthesis::dir_ = nullptr;
std::string* Synthesis::checkpoint_ = nullptr;

TEST_F(Synthesis, ATextWithSomethingToSayGivesAudio) {
  const SynthesisResult r = synthesize(options("hello world."));
  EXPECT_EQ(r.step, 7);
  EXPECT_GT(r.mel.size(1), 0);
  EXPECT_GT(r.audio.numel(), 0);
  EXPECT_TRUE(torch::isfinite(r.audio).all().item<bool>());
  EXPECT_TRUE(r.unknown_report.empty()) << r.unknown_report;
}

// The crashes: a c10 "Padding size" error (rc 3) for these; now a UserError.
TEST_F(Synthesis, ATextWithNothingToSayIsAUserError) {
  for (const std::string text : {"", "   ", ".", "?! ,", "\xe6\x97\xa5\xe6\x9c\xac"}) {
    const std::string e = error_of([&] { synthesize(options(text)); });
    EXPECT_NE(e.find("nothing to say"), std::string::npos) << "'" << text << "': " << e;
  }
  // Unknown characters are named.
  const std::string e = error_of([&] { synthesize(options("\xe6\x97\xa5")); });
  EXPECT_NE(e.find("U+65E5"), std::string::npos) << e;
}

TEST_F(Synthesis, TheLengthScaleMustBeInItsRange) {
  for (const double scale : {0.0, -1.0, 1e6, 10.5, std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity()}) {
    SynthesisOptions o = options("hello");
    o.length_scale = scale;
    const std::string e = error_of([&] { synthesize(o); });
    EXPECT_NE(e.find("--length-scale"), std::string::npos) << scale << ": " << e;
    EXPECT_NE(e.find("must be in (0, 10]"), std::string::npos) << scale << ": " << e;
  }
  SynthesisOptions o = options("hello");
  o.length_scale = kMaxLengthScale;  // the bound itself is allowed
  EXPECT_GT(synthesize(o).mel.size(1), 0);
  o.noise_scale = -0.5;
  EXPECT_NE(error_of([&] { synthesize(o); }).find("--noise-scale"), std::string::npos);
  o.noise_scale = 0.667;
  o.griffin_lim_iterations = -1;
  EXPECT_NE(error_of([&] { synthesize(o); }).find("--griffin-lim-iters"), std::string::npos);
}

TEST_F(Synthesis, TheFrameBudgetRefusesALongOutputUpFront) {
  SynthesisOptions o = options("hello world, this is a longer sentence.");
  const int64_t frames = synthesize(o).mel.size(1);
  o.max_frames = frames;  // exactly the budget: allowed
  EXPECT_EQ(synthesize(o).mel.size(1), frames);
  o.max_frames = frames - 2;
  const std::string e = error_of([&] { synthesize(o); });
  EXPECT_NE(e.find("predicts " + std::to_string(frames) + " mel frames"), std::string::npos) << e;
  EXPECT_NE(e.find("--max-frames " + std::to_string(frames - 2)), std::string::npos) << e;
  o.max_frames = 0;
  EXPECT_NE(error_of([&] { synthesize(o); }).find("--max-frames 0: must be positive"), std::string::npos);
}

// An untrained model predicts about one frame per token: one letter gives the minimum
// n_sqz frames, fewer than Griffin-Lim's STFT can pad. It is rendered, not a torch error.
TEST_F(Synthesis, AVeryShortOutputIsRendered) {
  SynthesisOptions o = options("a");
  o.length_scale = 0.01;
  const SynthesisResult r = synthesize(o);
  EXPECT_LE(r.mel.size(1), 3);
  EXPECT_GT(r.audio.numel(), 0);
  EXPECT_TRUE(torch::isfinite(r.audio).all().item<bool>());
}

TEST_F(Synthesis, TheToolExitsOneWithTheMessage) {
  const std::string exe = std::string(MONOFLOW_SYNTHESIZE_EXE) + " --checkpoint " + *checkpoint_ + " --device cpu --out " +
                          (*dir_ / "out.wav");
  int status = 0;
  for (const std::string args : {"--text ' . '", "--text hello --length-scale 0", "--text hello --length-scale -1",
                                 "--text hello --length-scale 1e6", "--text hello --max-frames 1"}) {
    const std::string out = testing::run_command(exe + " " + args + " 2>&1", &status);
    EXPECT_EQ(WEXITSTATUS(status), 1) << args << ": " << out;
    EXPECT_NE(out.find("synthesize: error: "), std::string::npos) << args << ": " << out;
  }
  std::string out = testing::run_command(exe + " --text hello --griffin-lim-iters 2 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  // Characters without a symbol beside words: spoken, with a warning naming them.
  out = testing::run_command(exe + " --text 'hello \xe6\x97\xa5' --griffin-lim-iters 2 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("warning: "), std::string::npos) << out;
  EXPECT_NE(out.find("U+65E5"), std::string::npos) << out;
}

TEST_F(Synthesis, ASingleSpeakerModelRefusesASpeaker) {
  auto o = options("hello world.");
  o.speaker = 0;
  EXPECT_NE(error_of([&] { synthesize(o); }).find("single-speaker"), std::string::npos);
}

TEST_F(Synthesis, AMultiSpeakerModelNeedsASpeakerInRangeAndUsesIt) {
  const std::string multi = tiny_checkpoint(*dir_, 3);
  auto o = options("hello world.");
  o.checkpoint = multi;
  const std::string missing = error_of([&] { synthesize(o); });
  EXPECT_NE(missing.find("--speaker"), std::string::npos) << missing;
  EXPECT_NE(missing.find("0..2"), std::string::npos) << missing;
  o.speaker = 3;
  EXPECT_NE(error_of([&] { synthesize(o); }).find("got 3"), std::string::npos);
  o.speaker = 0;
  const SynthesisResult first = synthesize(o);
  o.speaker = 2;
  const SynthesisResult other = synthesize(o);
  EXPECT_GT(first.mel.size(1), 0);
  // The speaker embedding conditions the decoder and the duration predictor: another voice.
  const bool same_shape = first.mel.sizes() == other.mel.sizes();
  EXPECT_TRUE(!same_shape || !torch::allclose(first.mel, other.mel));
}

// A neural vocoder in TorchScript, as users export HiFi-GAN: here a tiny scripted module made by
// Python's torch (skipped where the configured Python has none) whose output is known exactly.
TEST_F(Synthesis, ATorchScriptVocoderReplacesGriffinLim) {
  const std::string python = MONOFLOW_TEST_PYTHON;
  if (python.empty() || std::system((python + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no Python with torch";
  }
  const std::string path = *dir_ / "vocoder.ts";
  const std::string script =
      "import torch\n"
      "class V(torch.nn.Module):\n"
      "    def forward(self, mel):\n"
      "        return torch.tanh(mel.mean(1, keepdim=True)).repeat_interleave(4, dim=2)\n"
      "torch.jit.script(V()).save('" + path + "')\n";
  std::ofstream(*dir_ / "make_vocoder.py") << script;
  int status = 0;
  const std::string out = testing::run_command(python + " " + (*dir_ / "make_vocoder.py") + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;

  auto o = options("hello world.");
  o.vocoder = path;
  const SynthesisResult r = synthesize(o);
  ASSERT_EQ(r.audio.numel(), 4 * r.mel.size(1));
  const auto expected = torch::tanh(r.mel.mean(0)).repeat_interleave(4);
  EXPECT_TRUE(torch::allclose(r.audio, expected, 1e-5, 1e-6));

  std::ofstream(*dir_ / "not_a_vocoder.ts") << "not a zip file";
  o.vocoder = *dir_ / "not_a_vocoder.ts";
  EXPECT_NE(error_of([&] { synthesize(o); }).find("TorchScript"), std::string::npos);
}

// --text-file: the lines' ids and texts, and what is refused with FILE:LINE.
TEST_F(Synthesis, ATextFileNamesItsLinesByIdOrLineNumber) {
  const std::string path = *dir_ / "lines.txt";
  {
    std::ofstream f(path);
    f << "\xEF\xBB\xBFhello there.\n\n# a comment\n  \nLJ001-0001|Raw Text.|normalised text\r\nsecond line\n";
  }
  const auto lines = read_text_file(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].id, "0001");
  EXPECT_EQ(lines[0].text, "hello there.");
  EXPECT_EQ(lines[1].id, "LJ001-0001");
  EXPECT_EQ(lines[1].text, "normalised text");
  EXPECT_EQ(lines[1].line, 5);
  EXPECT_EQ(lines[2].id, "0006");
  {
    std::ofstream f(path);
    f << "a|hello\nb|world\na|again\n";
  }
  EXPECT_NE(error_of([&] { read_text_file(path); }).find("lines.txt:3: id 'a' appears twice"), std::string::npos);
  {
    std::ofstream f(path);
    f << "../x|hello\n";
  }
  EXPECT_NE(error_of([&] { read_text_file(path); }).find("lines.txt:1:"), std::string::npos);
  {
    std::ofstream f(path);
    f << "# nothing\n\n";
  }
  EXPECT_NE(error_of([&] { read_text_file(path); }).find("no line to say"), std::string::npos);
  EXPECT_NE(error_of([&] { read_text_file(dir_->path()); }).find("cannot read"), std::string::npos);
}

// One model for many texts: each say() is a whole synthesis, and its errors name the line.
TEST_F(Synthesis, ASynthesizerSaysManyTextsAndNamesTheLineThatFails) {
  Synthesizer synthesizer(options(""));
  const SynthesisResult a = synthesizer.say("hello world.");
  const SynthesisResult b = synthesizer.say("a much longer sentence than the first one.");
  EXPECT_EQ(a.step, 7);
  EXPECT_GT(a.audio.numel(), 0);
  EXPECT_GT(b.mel.size(1), a.mel.size(1));  // more text, more frames
  const std::string e = error_of([&] { synthesizer.say(" . ", "lines.txt:4"); });
  EXPECT_NE(e.find("lines.txt:4 ' . ': nothing to say"), std::string::npos) << e;
  // the same text with the same seed, through synthesize() and a fresh Synthesizer: same audio
  const SynthesisResult again = Synthesizer(options("")).say("hello world.");
  EXPECT_TRUE(torch::equal(again.audio, a.audio));
}

TEST_F(Synthesis, TheToolWritesOneWavPerLineOfATextFile) {
  const std::string lines = *dir_ / "tool_lines.txt", out = *dir_ / "tool_out";
  {
    std::ofstream f(lines);
    f << "first|hello world.\nsecond|good morning.\n";
  }
  const std::string exe = std::string(MONOFLOW_SYNTHESIZE_EXE) + " --checkpoint " + *checkpoint_ +
                          " --device cpu --griffin-lim-iters 2 --text-file " + lines + " --out-dir " + out;
  int status = 0;
  std::string log = testing::run_command(exe + " --mels 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << log;
  for (const std::string id : {"first", "second"}) {
    EXPECT_GT(std::filesystem::file_size(out + "/" + id + ".wav"), 44u) << id;
    EXPECT_GT(std::filesystem::file_size(out + "/" + id + ".npy"), 128u) << id;
  }
  EXPECT_NE(log.find("wrote 2 wavs"), std::string::npos) << log;
  log = testing::run_command(exe + " --text hello 2>&1", &status);
  EXPECT_NE(WEXITSTATUS(status), 0) << log;  // --text and --text-file exclude each other
  log = testing::run_command(exe + " --mel-png x.png 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("--mels"), std::string::npos) << log;
}

}  // namespace
}  // namespace monoflow::train
