// The training loop end to end on a tiny corpus (CPU): exact resume, backend switch, what it
// writes (metrics, TensorBoard, PNGs, wavs, checkpoints), signals, and user errors.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <thread>

#include "align/mas.h"
#include "common/error.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "test_util.h"
#include "tiny_corpus.h"
#include "weights_util.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "train/signals.h"
#include "train/fused_adam.h"
#include "train/train_step.h"
#include "train/trainer.h"
#include "train/run_parts.h"
#include "train/validation.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::run;

// One corpus for the whole suite.
const std::string& corpus() { return testing::suite_corpus(); }

// step -> {key -> value} of the lines of metrics.jsonl that hold keys[0].
std::map<int64_t, std::map<std::string, double>> metrics_lines(const std::string& run_dir,
                                                               const std::vector<std::string>& keys) {
  std::map<int64_t, std::map<std::string, double>> out;
  std::istringstream in(testing::read_text(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const YAML::Node n = YAML::Load(line);
    if (!n[keys.front()]) continue;
    auto& row = out[n["step"].as<int64_t>()];
    for (const auto& key : keys) row[key] = n[key].as<double>();
  }
  return out;
}

// The training lines (those with loss/mle) and the validation lines.
std::map<int64_t, std::map<std::string, double>> training_metrics(const std::string& run_dir) {
  return metrics_lines(run_dir, {"loss/mle", "loss/dur", "lr", "grad_norm"});
}
std::map<int64_t, std::map<std::string, double>> validation_metrics(const std::string& run_dir) {
  return metrics_lines(run_dir, {"val/loss/mle", "val/loss/dur"});
}

using testing::expect_same_weights;
using testing::load_weights;

constexpr int kN = 3;

TEST(Trainer, ResumeIsExact) {
  TempDir dir;
  const Config straight = testing::tiny_config(corpus(), dir / "straight", 2 * kN);
  const RunSummary a = run(straight);
  EXPECT_EQ(a.step, 2 * kN);
  EXPECT_EQ(a.stop_reason, "max_steps");

  const Config first_half = testing::tiny_config(corpus(), dir / "resumed", kN);
  const RunSummary b1 = run(first_half);
  EXPECT_EQ(b1.step, kN);
  // As if the first run had gone on past its checkpoint before dying: that line must go.
  // (A value no real line holds: the test once searched for "123", which timings sometimes contain.)
  std::ofstream(dir / "resumed/metrics.jsonl", std::ios::app) << "{\"step\":" << kN + 1 << ",\"epoch\":2,\"loss/mle\":-777.25}\n";
  const Config second_half = testing::tiny_config(corpus(), dir / "resumed", 2 * kN);
  const RunSummary b2 = run(second_half, "latest");
  EXPECT_EQ(b2.step, 2 * kN);

  EXPECT_EQ(testing::read_text(dir / "resumed/metrics.jsonl").find("\"loss/mle\":-777.25"), std::string::npos);
  const auto ma = training_metrics(dir / "straight"), mb = training_metrics(dir / "resumed");
  ASSERT_EQ(ma.size(), static_cast<size_t>(2 * kN));
  ASSERT_EQ(mb.size(), static_cast<size_t>(2 * kN));
  for (int64_t s = 1; s <= 2 * kN; ++s) {
    for (const char* key : {"loss/mle", "loss/dur", "lr", "grad_norm"}) {
      EXPECT_EQ(ma.at(s).at(key), mb.at(s).at(key)) << key << " at step " << s;
    }
  }
  // Training moved the weights and the loss is finite.
  EXPECT_TRUE(std::isfinite(ma.at(2 * kN).at("loss/mle")));
  auto wa = load_weights(straight, a.checkpoint), wb = load_weights(second_half, b2.checkpoint);
  expect_same_weights(wa, wb);
  // The validation of the last step too: its losses, and its sample (its noise drawn from the
  // restored generator, through the inverse flows), where the straight run validated before
  // and the resumed one had not.
  const auto va = validation_metrics(dir / "straight"), vb = validation_metrics(dir / "resumed");
  ASSERT_EQ(va.count(2 * kN), 1u);
  ASSERT_EQ(vb.count(2 * kN), 1u);
  EXPECT_EQ(va.at(2 * kN), vb.at(2 * kN));
  const std::string sample = "/samples/val_000000006.wav";  // step 2 * kN
  EXPECT_TRUE(testing::read_text(dir / "straight" + sample) == testing::read_text(dir / "resumed" + sample))
      << sample << " differs";
}

// What a validation logs is what the weights of its step give: the losses of a model loaded
// from that step's checkpoint and validated in a process of its own. The CPU's inference caches
// (the weight norm's weights, the folded skip weights, the inverse 1x1 weights) once outlived
// the first forward without gradient (DDI's), because the optimizer updates its flat buffer
// without bumping the parameters' version counters, so every validation measured DDI's weights.
TEST(Trainer, EachValidationMeasuresTheWeightsOfItsStep) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  const Config c = testing::tiny_config(corpus(), run_dir, 3 * kN);  // validations and checkpoints at 3, 6, 9
  run(c);
  const auto logged = validation_metrics(run_dir);
  ASSERT_EQ(logged.size(), 3u);
  for (const auto& [step, values] : logged) {
    RunParts parts;
    choose_devices(c, parts);
    build_data_and_model(c, parts);
    load_checkpoint(run_dir + "/checkpoints/" + checkpoint_filename(step), *parts.model, nullptr);
    const ValidationResult v =
        validate(parts.model, *parts.val_loader, parts.device,
                 validation_options(c, parts.step_options,
                                    parts.datasets.validation->mel_spectrogram().filterbank()));
    EXPECT_NEAR(v.loss_mle, values.at("val/loss/mle"), 1e-9) << "step " << step;
    EXPECT_NEAR(v.loss_dur, values.at("val/loss/dur"), 1e-9) << "step " << step;
  }
}

// The same corpus written to another folder (a longer path, with spaces) trains to the same
// losses and weights: nothing in the split, the order, the batches or the features depends on
// where the dataset lies.
TEST(Trainer, ACorpusInAnotherFolderTrainsTheSame) {
  TempDir dir;
  const std::string elsewhere = dir / "elsewhere/a longer path/corpus";
  testing::write_tiny_corpus(elsewhere);
  const Config here = testing::tiny_config(corpus(), dir / "here", kN);
  const Config there = testing::tiny_config(elsewhere, dir / "there", kN);
  const RunSummary a = run(here), b = run(there);
  const auto ma = training_metrics(dir / "here"), mb = training_metrics(dir / "there");
  ASSERT_EQ(ma.size(), static_cast<size_t>(kN));
  ASSERT_EQ(mb.size(), static_cast<size_t>(kN));
  for (int64_t s = 1; s <= kN; ++s) {
    for (const char* key : {"loss/mle", "loss/dur", "grad_norm"}) {
      EXPECT_EQ(ma.at(s).at(key), mb.at(s).at(key)) << key << " at step " << s;
    }
  }
  auto wa = load_weights(here, a.checkpoint), wb = load_weights(there, b.checkpoint);
  expect_same_weights(wa, wb);
}

TEST(Trainer, CompareAlignAndAutoBackendTrainIdenticallyToCpu) {
  TempDir dir;
  const Config cpu = testing::tiny_config(corpus(), dir / "cpu", kN);
  const Config compared = testing::tiny_config(corpus(), dir / "compare", kN,
                                               {"run.align_backend=auto", "run.compare_align=true"});
  const RunSummary a = run(cpu), b = run(compared);
  const auto ma = training_metrics(dir / "cpu"), mb = training_metrics(dir / "compare");
  ASSERT_EQ(ma.size(), static_cast<size_t>(kN));
  for (int64_t s = 1; s <= kN; ++s) EXPECT_EQ(ma.at(s).at("loss/mle"), mb.at(s).at("loss/mle")) << s;
  auto wa = load_weights(cpu, a.checkpoint), wb = load_weights(compared, b.checkpoint);
  expect_same_weights(wa, wb);
  // --compare-align logged each available backend's time.
  const std::string metrics = testing::read_text(dir / "compare/metrics.jsonl");
  EXPECT_NE(metrics.find("\"time/mas_ms/cpu\":"), std::string::npos);
}

TEST(Trainer, WritesCheckpointsImagesSamplesAndTensorBoard) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  const Config c = testing::tiny_config(corpus(), run_dir, 2 * kN, {"train.keep_checkpoints=1"});
  const RunSummary s = run(c);
  // keep_checkpoints 1: only the newest of steps 3 and 6.
  const auto ckpts = list_checkpoints(run_dir + "/checkpoints");
  ASSERT_EQ(ckpts.size(), 1u);
  EXPECT_EQ(fs::path(ckpts[0]).filename(), checkpoint_filename(2 * kN));
  EXPECT_EQ(read_checkpoint_state(ckpts[0]).config_yaml, to_yaml(c));
  EXPECT_EQ(testing::read_text(run_dir + "/config.yaml"), to_yaml(c));
  for (const char* f : {"images/align_000000003.png", "images/val_align_000000003.png",
                        "images/val_mel_000000006.png", "images/val_align_infer_000000006.png",
                        "samples/val_000000003.wav", "samples/val_000000006.wav"}) {
    EXPECT_TRUE(fs::exists(run_dir + "/" + f)) << f;
  }
  EXPECT_EQ(testing::read_text(run_dir + "/images/align_000000003.png").substr(1, 3), "PNG");
  EXPECT_EQ(testing::read_text(run_dir + "/samples/val_000000006.wav").substr(0, 4), "RIFF");
  // val_mel: two plots with axes and titles (target over generated), not two bare heatmaps
  // (n_mels + 1 + n_mels rows): each mel has its margins around it.
  const std::string mel_png = testing::read_text(run_dir + "/images/val_mel_000000006.png");
  ASSERT_GT(mel_png.size(), 24u);
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(mel_png[at + i]);
    return static_cast<int64_t>(v);
  };
  const int64_t n_mels = c.data.mel.n_mel_channels;
  EXPECT_GE(be32(20), 2 * n_mels + 2 * 50) << "height";  // IHDR: width at 16, height at 20

  // TensorBoard reads back the logged values.
  int status = 0;
  const std::string out = testing::run_command(std::string(MONOFLOW_TEST_PYTHON) + " " + MONOFLOW_TEST_DIR +
                                                   "/read_events.py " + run_dir + "/tensorboard 2>&1",
                                               &status);
  ASSERT_EQ(status, 0) << out;
  const YAML::Node tb = YAML::Load(out);
  const auto metrics = training_metrics(run_dir);
  const YAML::Node mle = tb["scalars"]["loss/mle"];
  ASSERT_EQ(mle.size(), static_cast<size_t>(2 * kN));
  for (size_t i = 0; i < mle.size(); ++i) {
    const int64_t step = mle[i][0].as<int64_t>();
    EXPECT_EQ(step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(mle[i][1].as<float>(), static_cast<float>(metrics.at(step).at("loss/mle")));
  }
  EXPECT_EQ(tb["scalars"]["lr"].size(), static_cast<size_t>(2 * kN));
  EXPECT_EQ(tb["scalars"]["val/loss/mle"].size(), 2u);
  // MAS is timed (a second run of it) only under --compare-align.
  EXPECT_FALSE(tb["scalars"]["time/mas_ms/cpu"].IsDefined());
  ASSERT_EQ(tb["images"]["val/align_mas"].size(), 2u);
  EXPECT_EQ(testing::read_text(tb["images"]["train/align"][0]["file"].as<std::string>()),
            testing::read_text(run_dir + "/images/align_000000003.png"));
  ASSERT_EQ(tb["audio"]["val/audio_griffin_lim"].size(), 2u);
  EXPECT_EQ(tb["audio"]["val/audio_griffin_lim"][0]["sample_rate"].as<double>(), 22050.0);
}

TEST(Trainer, ANormalEndValidatesTheLastStep) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  run(testing::tiny_config(corpus(), run_dir, 4));  // validation every 3 steps, and at the end (4)
  EXPECT_TRUE(fs::exists(run_dir + "/samples/val_000000003.wav"));
  EXPECT_TRUE(fs::exists(run_dir + "/samples/val_000000004.wav"));
  EXPECT_TRUE(fs::exists(run_dir + "/images/val_align_000000004.png"));
}

TEST(Trainer, SigtermSavesACheckpointAndStops) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  const Config c = testing::tiny_config(corpus(), run_dir, 1000, {"train.checkpoint_interval=1000",
                                                                   "train.val_interval=0"});
  // After the first logged step the handler is installed: SIGTERM to ourselves.
  std::thread killer = testing::signal_at_step_two(run_dir, [] { return ::getpid(); }, SIGTERM);
  const RunSummary s = run(c);
  killer.join();
  EXPECT_TRUE(s.interrupted);
  EXPECT_EQ(s.signal, SIGTERM);
  EXPECT_EQ(s.stop_reason, "signal");
  EXPECT_GE(s.step, 2);
  EXPECT_LT(s.step, 1000);
  EXPECT_TRUE(fs::is_empty(run_dir + "/samples")) << "an interrupted run must not stop to validate";
  ASSERT_FALSE(s.checkpoint.empty());
  EXPECT_EQ(read_checkpoint_state(s.checkpoint).step, s.step);
  clear_stop_request();
}

// On a GPU: every CUDA-visible backend trains the same first step (identical MAS paths give
// identical losses; eager steps, so that no backend's batch is padded to a graph bucket:
// padding moves the dropout masks), --compare-align finds no disagreement over several
// graphed steps, bf16 runs (with the text side in bf16 too).
TEST(TrainerGpu, BackendsAgreeAndCompareAlignPasses) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  TempDir dir;
  std::map<std::string, double> first_loss;
  for (const std::string backend : {"cpu", "cuda", "cuda-fast"}) {
    if (backend != "cpu" && !align::backend_available(align::parse_backend(backend))) continue;
    const std::string run_dir = dir / ("run-" + backend);
    run(testing::tiny_config(corpus(), run_dir, 1,
                             {"run.device=cuda", "train.use_cuda=true", "run.align_backend=" + backend,
                              "run.cuda_graphs=false"}));
    first_loss[backend] = training_metrics(run_dir).at(1).at("loss/mle");
  }
  for (const auto& [backend, loss] : first_loss) EXPECT_EQ(loss, first_loss.at("cpu")) << backend;
  for (const std::string text_side : {"false", "true"}) {
    SCOPED_TRACE("train.autocast_text_side=" + text_side);
    const std::string run_dir = dir / ("compare-" + text_side);
    const RunSummary s = run(testing::tiny_config(corpus(), run_dir, 6,
                                                  {"run.device=cuda", "train.use_cuda=true", "run.compare_align=true",
                                                   "train.fp16_run=true", "train.autocast_text_side=" + text_side}));
    EXPECT_EQ(s.step, 6);
    const auto m = training_metrics(run_dir);
    EXPECT_TRUE(std::isfinite(m.at(6).at("loss/mle")));
  }
}

// A non-finite loss skips the update: weights and optimizer state stay as they were.
TEST(TrainStep, NonFiniteLossSkipsTheUpdate) {
  TempDir dir;
  const Config c = testing::tiny_config(corpus(), dir / "run", 1);
  const text::TextProcessor tp(c.text);
  torch::manual_seed(3);
  models::GlowTTS model(model_options(c, static_cast<int64_t>(tp.vocab_size())));
  FusedAdam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  data::Batch b;
  b.text = torch::tensor({{5, 6, 7, 8}, {9, 10, 11, 0}}, torch::kInt64);
  b.text_lengths = torch::tensor({4, 3}, torch::kInt64);
  b.mel = torch::randn({2, 80, 24}) - 5;
  b.mel_lengths = torch::tensor({24, 20}, torch::kInt64);
  StepOptions o;
  const StepResult good = train_step(model, opt, b, 1e-3, o);
  ASSERT_TRUE(good.finite);
  EXPECT_TRUE(good.grad_norm.defined());
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
  const auto exp_avg_before = static_cast<torch::optim::AdamParamState&>(*opt.state().begin()->second).exp_avg().clone();
  const StepResult bad = train_step(model, opt, [&] {
    data::Batch nan = b;
    nan.mel = b.mel.clone();
    nan.mel[0][0][0] = std::numeric_limits<float>::quiet_NaN();
    return nan;
  }(), 1e-3, o);
  EXPECT_FALSE(bad.finite);
  EXPECT_TRUE(std::isnan(bad.loss_mle.item<double>()));
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], before[i])) << i;
  EXPECT_TRUE(torch::equal(static_cast<torch::optim::AdamParamState&>(*opt.state().begin()->second).exp_avg(),
                           exp_avg_before));
  EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*opt.state().begin()->second).step(), 1);
}

void expect_user_error(const std::function<void()>& f, const std::string& words);

// A learning rate a million times too large blows the weights up after the first update; the
// following steps are skipped and the run stops after max_nonfinite_steps of them in a row.
TEST(Trainer, StopsAfterKNonFiniteStepsInARow) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  expect_user_error([&] {
    run(testing::tiny_config(corpus(), run_dir, 50, {"train.learning_rate=1e6", "train.max_nonfinite_steps=3",
                                                     "train.val_interval=0"}));
  }, "non-finite for 3 steps in a row (train.max_nonfinite_steps)");
}

void expect_user_error(const std::function<void()>& f, const std::string& words) {
  try {
    f();
    FAIL() << "no error; expected one mentioning '" << words << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

// Graphed steps read a log step's losses and status back while the next step runs (the
// trainer waits for that step alone): every log step still gets its line, the last at the end
// of the run, and the device's count of skipped updates still stops a run of non-finite steps.
TEST(TrainerGpu, GraphedStepsLogEveryIntervalAndStopNonFiniteRuns) {
  if (!torch::cuda::is_available() || !align::backend_available(align::Backend::kCudaFast)) {
    GTEST_SKIP() << "no CUDA GPU";
  }
  TempDir dir;
  const std::vector<std::string> graphed{"run.device=cuda", "train.use_cuda=true", "run.align_backend=cuda-fast",
                                         "run.cuda_graphs=true", "train.val_interval=0"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), graphed.begin(), graphed.end());
    return more;
  };
  const Config logged_config = testing::tiny_config(corpus(), dir / "log", 7, with({"train.log_interval=3"}));
  RunOptions speaking;  // not quiet: the run's end says what recording the graphs cost
  speaking.config_yaml = to_yaml(logged_config);
  clear_stop_request();
  ::testing::internal::CaptureStderr();
  train(logged_config, speaking);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find(" of them with cuDNN's algorithm search, in "), std::string::npos) << said;  // the end's summary
  const auto m = training_metrics(dir / "log");
  std::vector<int64_t> logged;
  for (const auto& [step, values] : m) {
    logged.push_back(step);
    EXPECT_TRUE(std::isfinite(values.at("loss/mle"))) << step;
    EXPECT_GT(values.at("loss/dur"), 0) << step;
    EXPECT_GT(values.at("grad_norm"), 0) << step;
  }
  EXPECT_EQ(logged, (std::vector<int64_t>{1, 3, 6}));
  expect_user_error([&] {
    run(testing::tiny_config(corpus(), dir / "nonfinite", 50,
                             with({"train.learning_rate=1e6", "train.max_nonfinite_steps=3", "train.log_interval=2"})));
  }, "steps in a row (train.max_nonfinite_steps)");  // 3 or more: the device counts on between reads
}

TEST(Trainer, BadCheckpointsAndConfigsAreRefusedClearly) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  // --resume without any checkpoint.
  expect_user_error([&] { run(testing::tiny_config(corpus(), run_dir, 1), "latest"); }, "no checkpoint");
  // --resume PATH with garbage.
  const std::string garbage = dir / "garbage.pt";
  std::ofstream(garbage) << "not a checkpoint";
  expect_user_error([&] { run(testing::tiny_config(corpus(), run_dir, 1), garbage); }, garbage);
  // A checkpoint of another model size.
  const RunSummary small = run(testing::tiny_config(corpus(), run_dir, 1));
  expect_user_error([&] {
    run(testing::tiny_config(corpus(), dir / "other", 2, {"model.hidden_channels=24", "model.hidden_channels_enc=24"}),
        small.checkpoint);
  }, "incompatible checkpoint");
  // Config values the machine cannot honour.
  if (!torch::cuda::is_available()) {
    expect_user_error([&] { run(testing::tiny_config(corpus(), run_dir, 1, {"run.align_backend=cuda"})); },
                      "run.align_backend");
    expect_user_error([&] { run(testing::tiny_config(corpus(), run_dir, 1, {"run.device=cuda"})); }, "run.device");
  }
  // (Into a fresh directory: run_dir holds a run now, which a fresh run would be refused first.)
  expect_user_error([&] { run(testing::tiny_config(dir / "no-such-corpus", dir / "fresh", 1)); }, "no-such-corpus");
}

TEST(TrainCli, DryRunPrintsTheResolvedConfigAndRejectsTypos) {
  TempDir dir;
  std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(corpus(), dir / "run", 1);
  const std::string exe = std::string(MONOFLOW_TRAIN_EXE) + " --config " + (dir / "tiny.yaml");
  int status = 0;
  std::string out = testing::run_command(exe + " --dry-run --set train.batch_size=3 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("  batch_size: 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  hop_length: 256\n"), std::string::npos) << out;  // defaults are printed too
  EXPECT_FALSE(std::filesystem::exists(dir / "run/checkpoints")) << "a dry run must not train";
  out = testing::run_command(exe + " --dry-run --set train.batchsize=3 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("unknown key 'train.batchsize' (did you mean 'train.batch_size'?)"), std::string::npos) << out;
}

TEST(TrainCli, ErrorsExitNonZeroNamingTheFile) {
  TempDir dir;
  int status = 0;
  std::string out = testing::run_command(std::string(MONOFLOW_TRAIN_EXE) + " --config " + (dir / "missing.yaml") + " 2>&1", &status);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(out.find("missing.yaml"), std::string::npos) << out;
  std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(corpus(), dir / "run", 1);
  std::ofstream(dir / "bad.pt") << "junk";
  out = testing::run_command(std::string(MONOFLOW_TRAIN_EXE) + " --config " + (dir / "tiny.yaml") + " --resume " +
                                 (dir / "bad.pt") + " 2>&1",
                             &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("bad.pt"), std::string::npos) << out;
  EXPECT_NE(out.find("corrupt"), std::string::npos) << out;
}

// Interrupted is not finished: after its checkpoint the tool exits 128 + the signal (130 for
// Ctrl-C), as a shell reports a process the signal ended (#13: it exited 0).
TEST(TrainCli, ASignalStopsWithACheckpointAndExits128PlusTheSignal) {
  TempDir dir;
  const std::string run_dir = dir / "run";
  std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(corpus(), run_dir, 1000);
  const std::string train = std::string(MONOFLOW_TRAIN_EXE) + " --config " + (dir / "tiny.yaml") +
                            " --set train.val_interval=0 --set train.checkpoint_interval=1000";
  // No timeout(1) in between: the signal goes to the trainer itself (the killer below sends
  // it within 60 s in any case, so the run ends).
  const std::string command = "cd " + dir.path() + " && (" + train +
                              " > train.log 2>&1 & echo $! > train.pid; wait $!; echo $? > train.rc)";
  testing::run_signalling_at_step_two(command, run_dir, dir / "train.pid", SIGINT);
  const std::string log = testing::read_text(dir / "train.log");
  EXPECT_EQ(std::atoi(testing::read_text(dir / "train.rc").c_str()), 128 + SIGINT) << log;
  EXPECT_NE(log.find("stopped by signal 2"), std::string::npos) << log;
  const std::string ckpt = newest_checkpoint(run_dir + "/checkpoints");
  ASSERT_FALSE(ckpt.empty()) << log;
  EXPECT_GE(read_checkpoint_state(ckpt).step, 2);
}

// The reproduction: --max-steps -5 and --max-minutes -5 were silently ignored.
TEST(TrainCli, NumbersOutOfRangeAreRejected) {
  TempDir dir;
  std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(corpus(), dir / "run", 1);
  const std::string exe = std::string(MONOFLOW_TRAIN_EXE) + " --config " + (dir / "tiny.yaml") + " --dry-run ";
  int status = 0;
  for (const auto& [args, words] : std::vector<std::pair<std::string, std::string>>{
           {"--max-steps -5", "--max-steps: must be a whole number >= 1, got -5"},
           {"--max-steps 0", "--max-steps: must be a whole number >= 1, got 0"},
           {"--max-steps 2.5", "--max-steps"},
           {"--max-minutes -5", "--max-minutes: must be a number >= 0 (0: no limit), got -5"},
           {"--max-minutes nan", "--max-minutes"},
           {"--max-minutes inf", "--max-minutes"}}) {
    const std::string out = testing::run_command(exe + args + " 2>&1", &status);
    EXPECT_NE(WEXITSTATUS(status), 0) << args << ": " << out;
    EXPECT_NE(out.find(words), std::string::npos) << args << ": " << out;
    EXPECT_EQ(out.find("batch_size"), std::string::npos) << args << ": the dry run ran";
  }
  const std::string out = testing::run_command(exe + "--max-steps 7 --max-minutes 0.5 2>&1", &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("  max_steps: 7\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace monoflow::train
