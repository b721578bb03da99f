// synthesize's bounds: a text with nothing to say, the length scale's range, the frame budget
// (checked before the decoder runs), a very short output; through the library and the tool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "common/error.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "test_util.h"
#include "tiny_checkpoint.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "train/precision.h"
#include "train/rng_state.h"
#include "infer/npy.h"
#include "infer/synthesis.h"

namespace monoflow::train {
namespace {

using testing::error_of;
using testing::TempDir;


class Synthesis : public testing::SharedCheckpointSuite<Synthesis> {
 public:
  static std::string make_checkpoint(const TempDir& dir) { return tiny_checkpoint(dir); }

 protected:
  // One intra-op thread: ctest runs several suites at once, and a batch's ops are large enough
  // for torch to spread them over every core: on the 16-core GPU machine, four such processes
  // took minutes for batch tests that take a second alone. The batch-size test's tool runs get
  // OMP_NUM_THREADS=1 likewise.
  void SetUp() override {
    threads_ = torch::get_num_threads();
    torch::set_num_threads(1);
  }
  void TearDown() override { torch::set_num_threads(threads_); }
  int threads_ = 1;
  static SynthesisOptions options(const std::string& text) {
    SynthesisOptions o;
    o.checkpoint = *checkpoint_;
    o.text = text;
    o.device = "cpu";
    o.griffin_lim_iterations = 2;
    return o;
  }
};

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

// The day-one rough edges of the tool's command line: --set overrides the checkpoint's config
// (it was rc 109, an unknown option), --help shows the defaults (-o out.wav), and a --device
// the machine lacks is named as the flag typed, not as the config key run.device.
TEST_F(Synthesis, TheToolTakesSetShowsDefaultsAndNamesItsFlags) {
  const std::string exe = std::string(MONOFLOW_SYNTHESIZE_EXE) + " --checkpoint " + *checkpoint_ +
                          " --text hello --griffin-lim-iters 2 --out " + (*dir_ / "set.wav");
  int status = 0;
  // data.sampling_rate of the snapshot, overridden: the wav's header says the new rate.
  std::string out = testing::run_command(exe + " --device cpu --set data.sampling_rate=16000 --set data.mel_fmax=7000 2>&1",
                                         &status);
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  std::ifstream wav(*dir_ / "set.wav", std::ios::binary);
  char header[28] = {};
  wav.read(header, sizeof header);
  uint32_t rate = 0;
  std::memcpy(&rate, header + 24, 4);
  EXPECT_EQ(rate, 16000u);
  out = testing::run_command(exe + " --device cpu --set data.sampling_rat=16000 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("--set data.sampling_rat: unknown key"), std::string::npos) << out;

  out = testing::run_command(std::string(MONOFLOW_SYNTHESIZE_EXE) + " --help 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  // each option's line of --help ends its type with "=<default>" ("INT:POSITIVE=16")
  auto line_of = [&](const std::string& option) {
    const size_t at = out.find("  " + option);
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  for (const auto& [option, shown] : std::vector<std::pair<std::string, std::string>>{
           {"-o,--out", "=out.wav"}, {"--out-dir", "=synth"}, {"--batch-size", "=16"}, {"--noise-scale", "=0.667"},
           {"--device", "=auto"}, {"--speaker", "=none"}, {"--max-frames", "=30000"}}) {
    EXPECT_NE(line_of(option).find(shown), std::string::npos) << option << ": " << line_of(option) << "\n" << out;
  }

  if (torch::cuda::is_available()) return;  // the message below is for a machine without a GPU
  out = testing::run_command(exe + " --device cuda 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("synthesize: error: --device: 'cuda' but no CUDA GPU is visible"), std::string::npos) << out;
  EXPECT_NE(out.find("use --device cpu or auto"), std::string::npos) << out;
  EXPECT_EQ(out.find("run.device"), std::string::npos) << out;
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
  // A directory is refused as one (common/input_file.h), not read as an empty file.
  EXPECT_NE(error_of([&] { read_text_file(dir_->path()); }).find("is a directory"), std::string::npos);
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

// Texts of 1 to 40-odd tokens: a batch of them pads the short ones a lot.
const std::vector<Utterance> kBatchTexts = {
    {"hello world.", "t:1"},
    {"a much longer sentence than the first one, with a comma.", "t:2"},
    {"a", "t:3"},
    {"good morning, how are you today?", "t:4"},
    {"yes.", "t:5"},
    {"the quick brown fox jumps over the lazy dog, twice.", "t:6"},
    {"short one.", "t:7"},
};

// texts[k]'s result for every k, through say_all with this batch size.
std::map<size_t, SynthesisResult> say_all(Synthesizer& s, const std::vector<Utterance>& texts, int batch_size) {
  std::map<size_t, SynthesisResult> results;
  s.say_all(texts, batch_size, [&](size_t k, SynthesisResult&& r) {
    EXPECT_TRUE(results.emplace(k, std::move(r)).second) << "text " << k << " reported twice";
  });
  EXPECT_EQ(results.size(), texts.size());
  return results;
}

// max |a - b| / max |b|: the tolerance below is relative to the mel's range.
double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

// Batched and one-by-one results of every text: same lengths, same alignment, mels within
// 1e-5 of their range. The batch changes only the summation order of float32 reductions (the
// padded positions add exact zeros: the attention's masked scores underflow to 0, the flows
// mask their inputs), about 1e-7 relative per op; 1e-5 leaves room for its growth through the
// encoder and twelve flows (measured: at most 2.2e-7 with the tiny model, noise on or off), and
// is far below any audible or vocoder-visible difference. The audio is not bit-equal either:
// Griffin-Lim turns those differences into a few 1e-5 of its 0.9 peak.
void expect_same_results(const std::map<size_t, SynthesisResult>& batched, const std::map<size_t, SynthesisResult>& one,
                         const std::vector<Utterance>& texts, double tolerance = 1e-5) {
  for (size_t k = 0; k < texts.size(); ++k) {
    SCOPED_TRACE(texts[k].text);
    const SynthesisResult& a = batched.at(k);
    const SynthesisResult& b = one.at(k);
    ASSERT_EQ(a.mel.sizes(), b.mel.sizes());
    ASSERT_EQ(a.alignment.sizes(), b.alignment.sizes());
    EXPECT_EQ(a.alignment.size(0), b.alignment.size(0));
    EXPECT_TRUE(torch::equal(a.alignment, b.alignment));
    EXPECT_LE(relative_difference(a.mel, b.mel), tolerance);
    EXPECT_GT(b.mel.abs().max().item<double>(), 0.1);  // a real mel, not zeros on both sides
    ASSERT_EQ(a.audio.numel(), b.audio.numel());
    EXPECT_LE((a.audio - b.audio).abs().max().item<double>(), 1e-3);  // Griffin-Lim, peak 0.9
  }
}

// The batch does not change what a text says: batch sizes 1, 3 and one larger than the list
// give each text the same mel and length, with the prior noise off and on (each text draws its
// own noise, so the noise does not depend on the batch either).
TEST_F(Synthesis, BatchedTextsEqualOneByOneWithAndWithoutNoise) {
  for (const double noise_scale : {0.0, 0.667}) {
    SCOPED_TRACE("noise scale " + std::to_string(noise_scale));
    SynthesisOptions o = options("");
    o.noise_scale = noise_scale;
    Synthesizer synthesizer(o);
    const auto one = say_all(synthesizer, kBatchTexts, 1);
    for (const int batch_size : {3, 100}) {
      SCOPED_TRACE("batch size " + std::to_string(batch_size));
      expect_same_results(say_all(synthesizer, kBatchTexts, batch_size), one, kBatchTexts);
    }
    // The lengths are the texts' own: more text, more frames (an untrained model: ~1 per token).
    EXPECT_GT(one.at(1).mel.size(1), 3 * one.at(0).mel.size(1));
    // say() is text 0 of a batch of one: synthesize() with that text gives the batch's first text.
    EXPECT_TRUE(torch::equal(synthesizer.say(kBatchTexts[0].text).mel, one.at(0).mel));
    o.text = kBatchTexts[0].text;
    EXPECT_TRUE(torch::equal(synthesize(o).mel, one.at(0).mel));
  }
}

// The noise is the text's own: it is on (the mel moves with it), it depends on the text's
// position, not on the other texts, and a new seed draws new noise.
TEST_F(Synthesis, EachTextDrawsItsOwnNoise) {
  SynthesisOptions o = options("");
  Synthesizer noisy(o);
  const auto first = say_all(noisy, kBatchTexts, 4);
  o.noise_scale = 0;
  Synthesizer quiet(o);
  const auto silent = say_all(quiet, kBatchTexts, 4);
  EXPECT_GT(relative_difference(first.at(3).mel, silent.at(3).mel), 1e-2);
  // Another text at position 1 (and so another batch layout): text 3 stays as it was.
  std::vector<Utterance> changed = kBatchTexts;
  changed[1].text = "something else entirely.";
  const auto second = say_all(noisy, changed, 4);
  for (size_t k : {0, 2, 3, 4, 5, 6}) {
    EXPECT_LE(relative_difference(second.at(k).mel, first.at(k).mel), 1e-5) << k;
  }
  // The same text at two positions: two draws.
  const std::vector<Utterance> twice = {{"hello world.", "a"}, {"hello world.", "b"}};
  const auto both = say_all(noisy, twice, 2);
  EXPECT_EQ(both.at(0).mel.sizes(), both.at(1).mel.sizes());
  EXPECT_GT(relative_difference(both.at(0).mel, both.at(1).mel), 1e-2);
  o.noise_scale = 0.667;
  o.seed = 99;
  const auto reseeded = say_all(*std::make_unique<Synthesizer>(o), twice, 2);
  EXPECT_GT(relative_difference(reseeded.at(0).mel, both.at(0).mel), 1e-2);
}

// A multi-speaker model: the speaker goes to every text of a batch.
TEST_F(Synthesis, AMultiSpeakerModelSaysABatchInItsSpeakersVoice) {
  auto o = options("");
  o.checkpoint = tiny_checkpoint(*dir_, 3);
  o.speaker = 2;
  Synthesizer synthesizer(o);
  expect_same_results(say_all(synthesizer, kBatchTexts, 3), say_all(synthesizer, kBatchTexts, 1), kBatchTexts);
  o.text = kBatchTexts[4].text;
  EXPECT_TRUE(torch::equal(synthesize(o).mel, say_all(synthesizer, {kBatchTexts[4]}, 1).at(0).mel));
}

// What serve asks of a batch: each text its own speaker and noise position, the symbols said,
// and a frame budget error of its own type. A batch of texts at noise position 0 in speakers
// 2, 0, 1 says each as a batch of one would (and as synthesize --speaker S --text would).
TEST_F(Synthesis, EachTextOfABatchHasItsOwnSpeakerAndNoisePosition) {
  auto o = options("");
  o.checkpoint = tiny_checkpoint(*dir_, 3);
  o.speaker = 1;
  Synthesizer synthesizer(o);
  std::vector<Utterance> texts;
  for (const int64_t speaker : {2, 0, 1}) {
    texts.push_back({kBatchTexts[static_cast<size_t>(speaker)].text, "request " + std::to_string(speaker), speaker, 0});
  }
  const auto batched = say_all(synthesizer, texts, 3);
  for (size_t k = 0; k < texts.size(); ++k) {
    SCOPED_TRACE(k);
    SynthesisOptions alone = o;
    alone.speaker = texts[k].speaker;
    alone.text = texts[k].text;
    const SynthesisResult one = synthesize(alone);
    EXPECT_LE(relative_difference(batched.at(k).mel, one.mel), 1e-5);
    EXPECT_EQ(batched.at(k).tokens.size(), static_cast<size_t>(one.alignment.size(0)));
  }
  // The speaker matters (another speaker, another mel: at initialisation the decoder's
  // couplings are the identity, so the speaker shows through the durations of a long text),
  // and so does the position.
  std::vector<Utterance> swapped = texts;
  swapped[2].speaker = 0;
  EXPECT_FALSE(torch::equal(say_all(synthesizer, swapped, 3).at(2).mel, batched.at(2).mel));
  swapped = texts;
  swapped[2].speaker = Utterance::kOptionsSpeaker;  // options.speaker, 1: the same as naming it
  EXPECT_TRUE(torch::equal(say_all(synthesizer, swapped, 3).at(2).mel, batched.at(2).mel));
  swapped = texts;
  swapped[0].noise_position = 5;
  EXPECT_GT(relative_difference(say_all(synthesizer, swapped, 3).at(0).mel, batched.at(0).mel), 1e-2);
  // The symbols said: "hello world." in characters, one per alignment row.
  const std::vector<std::string> hello = {"h", "e", "l", "l", "o", " ", "w", "o", "r", "l", "d", "."};
  EXPECT_EQ(say_all(synthesizer, {{"hello world.", "t", 0}}, 1).at(0).tokens, hello);
  // A speaker the model has not is refused naming the text, before anything is said.
  std::vector<Utterance> bad = texts;
  bad[1].speaker = 3;
  int said = 0;
  const std::string e = error_of([&] { synthesizer.say_all(bad, 1, [&](size_t, SynthesisResult&&) { ++said; }); });
  EXPECT_NE(e.find("request 0: speaker 3: "), std::string::npos) << e;
  EXPECT_NE(e.find("is a model of 3 speakers (0..2)"), std::string::npos) << e;
  EXPECT_EQ(said, 0);
  EXPECT_EQ(synthesizer.n_speakers(), 3);
  EXPECT_EQ(synthesizer.step(), 7);
  // Over the frame budget: a FrameBudgetError, which serve tells from other UserErrors.
  o.max_frames = 2;
  Synthesizer budget(o);
  EXPECT_THROW(budget.say_all(texts, 3, [](size_t, SynthesisResult&&) {}), FrameBudgetError);
}

// Errors of a batch: a text with nothing to say stops the run before any text is said; a text
// over the frame budget names its line; a batch size below 1 is refused.
TEST_F(Synthesis, ABatchNamesTheTextThatFails) {
  Synthesizer synthesizer(options(""));
  std::vector<Utterance> texts = kBatchTexts;
  texts.push_back({" . ", "t:9"});
  int said = 0;
  const std::string e = error_of([&] { synthesizer.say_all(texts, 2, [&](size_t, SynthesisResult&&) { ++said; }); });
  EXPECT_NE(e.find("t:9 ' . ': nothing to say"), std::string::npos) << e;
  EXPECT_EQ(said, 0);
  auto o = options("");
  Synthesizer one(o);
  const int64_t longest = say_all(one, kBatchTexts, 7).at(1).mel.size(1);
  o.max_frames = longest - 1;
  Synthesizer budget(o);
  const std::string over = error_of([&] { say_all(budget, kBatchTexts, 3); });
  EXPECT_NE(over.find("t:2: the model predicts " + std::to_string(longest) + " mel frames"), std::string::npos) << over;
  EXPECT_NE(error_of([&] { synthesizer.say_all(kBatchTexts, 0, {}); }).find("--batch-size 0: must be positive"),
            std::string::npos);
}

// On a GPU the batches run there (the decoder as a CUDA graph from a shape's second batch) and
// give the CPU's one-by-one results, noise included (it is drawn on the host). TF32 off: with
// it, convolutions round to 10-bit mantissas; float32 on both sides differs only in the
// kernels' summation order, and 1e-4 of the mel's range bounds that through twelve flows.
// Every batch size says each list of texts in turn on one GPU Synthesizer, so that a later
// list replays the graphs an earlier one recorded. Returns the CPU's results, list by list.
std::vector<std::map<size_t, SynthesisResult>> expect_gpu_batches_equal_cpu(
    SynthesisOptions o, const std::vector<std::vector<Utterance>>& lists, const std::vector<int>& batch_sizes) {
  set_allow_tf32(false);
  Synthesizer cpu(o);
  std::vector<std::map<size_t, SynthesisResult>> one;
  for (const auto& texts : lists) one.push_back(say_all(cpu, texts, 1));
  o.device = "cuda";
  Synthesizer gpu(o);
  for (const int batch_size : batch_sizes) {
    SCOPED_TRACE("batch size " + std::to_string(batch_size));
    for (size_t l = 0; l < lists.size(); ++l) expect_same_results(say_all(gpu, lists[l], batch_size), one[l], lists[l], 1e-4);
  }
  set_allow_tf32(true);
  return one;
}

TEST_F(Synthesis, BatchesOnTheGpuEqualTheCpuOneByOne) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Twelve texts in batches of 2: pairs of neighbouring lengths, some sharing a 64-frame
  // bucket, so that shapes come back and replay their graphs.
  std::vector<Utterance> texts = kBatchTexts;
  for (int i = 0; i < 5; ++i) texts.push_back({kBatchTexts[static_cast<size_t>(i)].text + " again", "u"});
  expect_gpu_batches_equal_cpu(options(""), {texts}, {2, 5, 2});
}

// serve's batches on a GPU: each text its own speaker, the decoder replayed as a CUDA graph
// whose speaker embedding is an input, not a constant of the recording. A perturbed model, so
// that the speaker conditions the decoder's frames (untrained, it shows only in the durations).
// Equal to the CPU one by one within the tolerance above (TF32 off); and the same shapes with
// the speakers swapped, replayed from the same graphs, give each text the other speaker's mel.
TEST_F(Synthesis, BatchesWithASpeakerPerTextOnTheGpuEqualTheCpuOneByOne) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto o = options("");
  o.checkpoint = tiny_checkpoint(*dir_, 3, /*perturbed=*/true);
  o.speaker = 0;  // every text names its own
  std::vector<Utterance> texts;
  for (size_t k = 0; k < kBatchTexts.size(); ++k) {
    texts.push_back({kBatchTexts[k].text, "s" + std::to_string(k), static_cast<int64_t>(k % 3)});
  }
  std::vector<Utterance> rotated = texts;
  for (auto& u : rotated) u.speaker = (u.speaker + 1) % 3;
  const auto one = expect_gpu_batches_equal_cpu(o, {texts, rotated}, {2, 2, 4});
  // The speaker reached every text: another speaker, another length or another mel.
  for (size_t k = 0; k < texts.size(); ++k) {
    const auto& a = one[0].at(k).mel;
    const auto& b = one[1].at(k).mel;
    EXPECT_TRUE(a.sizes() != b.sizes() || relative_difference(a, b) > 1e-2) << texts[k].text;
  }
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
  log = testing::run_command(exe + " --batch-size 0 2>&1", &status);
  EXPECT_NE(WEXITSTATUS(status), 0) << log;
  log = testing::run_command(exe + " --mel-png x.png 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("--mels"), std::string::npos) << log;
}

// --batch-size 1, 3 and one larger than the file write the same files under the same names:
// each <id>.npy holds the mel of that id's text as the library says it alone.
TEST_F(Synthesis, TheToolWritesTheSameFilesWhateverTheBatchSize) {
  const std::string lines = *dir_ / "batch_lines.txt";
  {
    std::ofstream f(lines);
    f << "# ids and line numbers mixed\n";
    for (size_t k = 0; k < kBatchTexts.size(); ++k) {
      f << (k % 2 == 0 ? "id" + std::to_string(k) + "|" : "") << kBatchTexts[k].text << "\n";
    }
  }
  const std::vector<std::string> ids = {"id0", "0003", "id2", "0005", "id4", "0007", "id6"};
  Synthesizer synthesizer(options(""));
  const auto expected = say_all(synthesizer, kBatchTexts, 1);
  std::map<std::string, std::string> first;  // id -> wav bytes, for batch size 1
  for (const std::string batch : {"1", "3", "100"}) {
    SCOPED_TRACE("--batch-size " + batch);
    const std::string out = *dir_ / ("batch_out_" + batch);
    int status = 0;
    const std::string log = testing::run_command("OMP_NUM_THREADS=1 " + std::string(MONOFLOW_SYNTHESIZE_EXE) +
                                                     " --checkpoint " + *checkpoint_ +
                                                     " --device cpu --griffin-lim-iters 2 --mels --text-file " + lines +
                                                     " --out-dir " + out + " --batch-size " + batch + " 2>&1",
                                                 &status);
    ASSERT_EQ(WEXITSTATUS(status), 0) << log;
    EXPECT_NE(log.find("wrote 7 wavs"), std::string::npos) << log;
    size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(out)) {
      (void)entry;
      ++files;
    }
    EXPECT_EQ(files, 2 * ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::string npy = testing::read_text(out + "/" + ids[k] + ".npy");
      const torch::Tensor mel = decode_npy(npy, ids[k]);
      ASSERT_EQ(mel.sizes(), expected.at(k).mel.sizes()) << ids[k];
      EXPECT_LE(relative_difference(mel, expected.at(k).mel), 1e-5) << ids[k];
      const std::string wav = testing::read_text(out + "/" + ids[k] + ".wav");
      EXPECT_EQ(wav.size(), 44 + 2 * static_cast<size_t>(expected.at(k).audio.numel())) << ids[k];
      // The same wav as batch size 1's, to Griffin-Lim's rounding (see expect_same_results).
      if (batch == "1") first[ids[k]] = wav;
      ASSERT_EQ(wav.size(), first.at(ids[k]).size());
      int max_step = 0;
      for (size_t i = 44; i + 1 < wav.size(); i += 2) {
        const auto sample = [](const std::string& w, size_t at) {
          return static_cast<int16_t>(static_cast<uint8_t>(w[at]) | (static_cast<uint8_t>(w[at + 1]) << 8));
        };
        max_step = std::max(max_step, std::abs(sample(wav, i) - sample(first.at(ids[k]), i)));
      }
      EXPECT_LE(max_step, 33) << ids[k];  // 1e-3 of full scale
    }
  }
}

}  // namespace
}  // namespace monoflow::train
