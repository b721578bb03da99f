// Configuration: defaults, the shipped ljspeech.yaml, overrides, and every kind of bad input
// with the place its message names.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include "common/error.h"
#include "train/config/config_io.h"

using monoflow::UserError;
using namespace monoflow::train;

namespace {

std::string source_dir() {
  const char* dir = std::getenv("MONOFLOW_SOURCE_DIR");
  return dir ? dir : ".";
}

const char* kMinimal = "data:\n  dataset_dir: corpus\n";

// The message of the UserError that parsing `yaml` (with overrides) throws; "" if none.
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "test.yaml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::string error_of_file(const std::string& path) {
  try {
    load_config(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// The official base config's values (configs/base.json of the original Glow-TTS, under its own
// key names), FlowGenerator's n_split and sigmoid_scale, and the Cython MAS's -inf. A file that
// sets them all reads back as the defaults.
const char* kOfficialBase = R"(
train: {seed: 1234, batch_size: 32, log_interval: 20, warmup_steps: 4000, learning_rate: 1.0,
        betas: [0.9, 0.98], eps: 1.0e-9, ddi: true, fp16_run: true}
data: {dataset_dir: corpus, text_cleaners: [english_cleaners], sampling_rate: 22050,
       filter_length: 1024, hop_length: 256, win_length: 1024, n_mel_channels: 80,
       mel_fmin: 0.0, mel_fmax: 8000.0, max_wav_value: 32768.0}
model: {hidden_channels: 192, filter_channels: 768, filter_channels_dp: 256, kernel_size: 3,
        p_dropout: 0.1, n_blocks_dec: 12, n_layers_enc: 6, n_heads: 2, p_dropout_dec: 0.05,
        dilation_rate: 1, kernel_size_dec: 5, n_block_layers: 4, n_sqz: 2, window_size: 4,
        prenet: true, mean_only: true, hidden_channels_enc: 192, hidden_channels_dec: 192,
        n_split: 4, sigmoid_scale: false}
run: {mas_neg_inf: -1.0e32}
)";

TEST(ConfigDefaults, MatchTheOfficialBaseConfig) {
  Config defaults;
  defaults.data.dataset_dir = "corpus";
  const Config official = parse_config(kOfficialBase, "base.yaml", {});
  EXPECT_EQ(to_yaml(official), to_yaml(defaults));
  // The emitted YAML holds every value above: a changed default shows in it.
  Config changed = defaults;
  changed.model.n_sqz(3);
  EXPECT_NE(to_yaml(changed), to_yaml(defaults));
}

TEST(ConfigFile, LjspeechYamlHoldsTheOfficialValues) {
  Config file = load_config(source_dir() + "/configs/ljspeech.yaml");
  Config defaults;
  defaults.data.dataset_dir = file.data.dataset_dir;
  defaults.train.checkpoint_interval = file.train.checkpoint_interval;
  defaults.text.cmudict_path = file.text.cmudict_path;
  // Every official value in the file equals the official default of config.h.
  EXPECT_EQ(to_yaml(file), to_yaml(defaults));
  EXPECT_EQ(file.data.dataset_dir, "data/LJSpeech-1.1");
  // CMUdict as the official base config: the dictionary scripts/setup.sh installs; "" (the
  // default) goes back to characters only.
  EXPECT_EQ(file.text.cmudict_path, "data/cmudict/cmudict.dict");
  EXPECT_EQ(load_config(source_dir() + "/configs/ljspeech.yaml", {"data.cmudict_path=\"\""}).text.cmudict_path, "");
  EXPECT_EQ(file.origin.at("train.batch_size"), source_dir() + "/configs/ljspeech.yaml:14");
}

TEST(ConfigFile, ReadsValuesOfEveryType) {
  Config c = parse_config(
      "train:\n  batch_size: 16\n  betas: [0.8, 0.99]\n  eps: 1e-8\n  ddi: false\n"
      "data:\n  dataset_dir: corpus\n  text_cleaners: [basic_cleaners, transliteration_cleaners]\n"
      "run:\n  align_backend: cuda-fast\n",
      "t.yaml");
  EXPECT_EQ(c.train.batch_size, 16);
  EXPECT_DOUBLE_EQ(c.train.betas[0], 0.8);
  EXPECT_DOUBLE_EQ(c.train.betas[1], 0.99);
  EXPECT_DOUBLE_EQ(c.train.eps, 1e-8);
  EXPECT_FALSE(c.train.ddi);
  EXPECT_EQ(c.text.cleaners,
            (std::vector<std::string>{"basic_cleaners", "transliteration_cleaners"}));
  EXPECT_EQ(c.run.align_backend, "cuda-fast");
  EXPECT_EQ(c.train.warmup_steps, 4000);  // untouched keys keep their defaults
}

TEST(ConfigFile, EmptySectionsAndFileKeepDefaults) {
  Config c = parse_config("train:\ndata:\n  dataset_dir: x\n", "t.yaml");
  EXPECT_EQ(c.train.batch_size, 32);
}

TEST(ConfigOverrides, ApplyInOrderAndRecordTheirOrigin) {
  Config c = parse_config(kMinimal, "t.yaml",
                          {"train.batch_size=16", "train.batch_size=8", "train.betas=[0.5, 0.6]",
                           "data.cmudict_path=dict.txt", "run.device=cuda:1", "train.fp16_run=false"});
  EXPECT_EQ(c.train.batch_size, 8);
  EXPECT_DOUBLE_EQ(c.train.betas[0], 0.5);
  EXPECT_EQ(c.text.cmudict_path, "dict.txt");
  EXPECT_EQ(c.run.device, "cuda:1");
  EXPECT_FALSE(c.train.fp16_run);
  EXPECT_EQ(c.origin.at("train.batch_size"), "--set");
}

TEST(ConfigOverrides, CanSupplyTheDataset) {
  Config c = parse_config("", "t.yaml", {"data.dataset_dir=/data/LJSpeech-1.1"});
  EXPECT_EQ(c.data.dataset_dir, "/data/LJSpeech-1.1");
}

TEST(ConfigErrors, SyntaxErrorNamesTheLine) {
  std::string m = error_of("data:\n  dataset_dir: x\ntrain:\n  batch_size: 4\n bad indent: 1\n");
  EXPECT_EQ(m.rfind("test.yaml:5: ", 0), 0u) << m;
  EXPECT_NE(m.find("YAML syntax error"), std::string::npos) << m;
}

TEST(ConfigErrors, UnknownKeyNamesFileLineKeyAndSuggests) {
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\ntrain:\n  seed: 1\n  batchsize: 16\n"),
            "test.yaml:5: unknown key 'train.batchsize' (did you mean 'train.batch_size'?)");
}

TEST(ConfigErrors, UnknownSection) {
  EXPECT_EQ(error_of("trian:\n  seed: 1\n"),
            "test.yaml:1: unknown section 'trian' (expected train, data, model or run)");
}

TEST(ConfigErrors, WrongTypes) {
  EXPECT_EQ(error_of("train:\n  batch_size: 3.5\n"),
            "test.yaml:2: train.batch_size: expected an integer, got '3.5'");
  EXPECT_EQ(error_of("train:\n  ddi: yes\n"),
            "test.yaml:2: train.ddi: expected true or false, got 'yes'");
  EXPECT_EQ(error_of("train:\n  learning_rate: fast\n"),
            "test.yaml:2: train.learning_rate: expected a finite number, got 'fast'");
  EXPECT_EQ(error_of("train:\n  betas: 0.9\n"),
            "test.yaml:2: train.betas: expected a pair of numbers, e.g. [0.9, 0.98]");
  EXPECT_EQ(error_of("data:\n  text_cleaners: english_cleaners\n"),
            "test.yaml:2: data.text_cleaners: expected a list of strings, e.g. [english_cleaners]");
  EXPECT_EQ(error_of("model:\n  hidden_channels:\n    a: 1\n"),
            "test.yaml:2: model.hidden_channels: expected an integer");
}

TEST(ConfigErrors, OutOfRangeValues) {
  EXPECT_EQ(error_of("train:\n  batch_size: 0\n"),
            "test.yaml:2: train.batch_size: must be > 0, got 0");
  EXPECT_EQ(error_of("model:\n  p_dropout: 1.5\n"),
            "test.yaml:2: model.p_dropout: must be in [0, 1), got 1.5");
  EXPECT_EQ(error_of("train:\n  scheduler: linear\n"),
            "test.yaml:2: train.scheduler: must be one of 'noam' 'constant', got 'linear'");
  EXPECT_EQ(error_of("run:\n  align_backend: gpu\n"),
            "test.yaml:2: run.align_backend: must be one of 'auto' 'cpu' 'cuda' 'cuda-fast', got 'gpu'");
  EXPECT_EQ(error_of("run:\n  device: gpu0\n"),
            "test.yaml:2: run.device: must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'gpu0'");
  EXPECT_EQ(error_of("train:\n  betas: [0.9, 1.2]\n"),
            "test.yaml:2: train.betas: each beta must be in [0, 1)");
}

TEST(ConfigErrors, DuplicateKey) {
  EXPECT_EQ(error_of("train:\n  seed: 1\n  seed: 2\n"), "test.yaml:3: train.seed: set twice");
}

TEST(ConfigErrors, CrossFieldChecksNameTheKeyAndItsLine) {
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\n  mel_fmax: 12000\n"),
            "test.yaml:3: data.mel_fmax: must not exceed half of data.sampling_rate (11025 Hz)");
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\n  win_length: 2048\n"),
            "test.yaml:3: data.win_length: must not exceed data.filter_length (1024)");
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\nmodel:\n  n_heads: 5\n"),
            "test.yaml:4: model.n_heads: must divide model.hidden_channels (192)");
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\n  n_speakers: 4\n"),
            "test.yaml (default value): model.gin_channels: must be > 0 when data.n_speakers > 1 "
            "(speaker embedding size)");
  EXPECT_NE(error_of("train:\n  seed: 1\n").find("no training data"), std::string::npos);
  // A value that is wrong only through an override is blamed on the override.
  EXPECT_EQ(error_of(kMinimal, {"data.sampling_rate=8000"}),
            "test.yaml (default value): data.mel_fmax: must not exceed half of data.sampling_rate "
            "(4000 Hz)");
  EXPECT_EQ(error_of(kMinimal, {"model.kernel_size=4"}),
            "--set: model.kernel_size: must be odd (same-length convolution)");
}

TEST(ConfigErrors, LibraryRecordsCheckTheirOwnValuesAndTheConfigNamesThePlace) {
  // The data and model sections are checked by their records' validate(): the message names
  // the key, the config the line (or --set) it was set on.
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\n  hop_length: 0\n"),
            "test.yaml:3: data.hop_length: must be > 0, got 0");
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\n  on_bad_line: ignore\n"),
            "test.yaml:3: data.on_bad_line: must be one of 'skip' 'error', got 'ignore'");
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\n  num_workers: -1\n"),
            "test.yaml:3: data.num_workers: must be >= 0, got -1");
  EXPECT_EQ(error_of(kMinimal, {"model.p_dropout_dec=1"}),
            "--set: model.p_dropout_dec: must be in [0, 1), got 1");
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\n  text_cleaners: [german_cleaners]\n"),
            "test.yaml:3: data.text_cleaners: unknown text cleaner 'german_cleaners'; known: "
            "english_cleaners, basic_cleaners, transliteration_cleaners");
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\nmodel:\n  gin_channels: 16\n"),
            "test.yaml:4: model.gin_channels: gin_channels > 0 needs data.n_speakers > 1 (set it to 0 "
            "for one speaker)");
}

TEST(ConfigModel, TakesWhatTheModelTakes) {
  // hidden_channels_enc: 0 is the official None (the encoder is hidden_channels wide), and
  // n_heads must divide the encoder's width.
  const Config c = parse_config("data:\n  dataset_dir: x\nmodel:\n  hidden_channels_enc: 0\n", "t.yaml");
  EXPECT_EQ(c.model.encoder_channels(), 192);
  EXPECT_EQ(error_of("data:\n  dataset_dir: x\nmodel:\n  hidden_channels_enc: 191\n"),
            "test.yaml (default value): model.n_heads: must divide model.hidden_channels_enc (191)");
}

TEST(ConfigErrors, BadOverrides) {
  EXPECT_EQ(error_of(kMinimal, {"train.batch_size"}),
            "--set train.batch_size: expected section.key=value, e.g. train.batch_size=16");
  EXPECT_EQ(error_of(kMinimal, {"train.bach_size=3"}),
            "--set train.bach_size: unknown key 'train.bach_size' (did you mean 'train.batch_size'?)");
  EXPECT_EQ(error_of(kMinimal, {"train.batch_size=-1"}),
            "--set train.batch_size: must be > 0, got -1");
  EXPECT_NE(error_of(kMinimal, {"train.betas=[0.9"}).find("--set train.betas: cannot parse value"),
            std::string::npos);
}

// A tool's flag that stands for a config key (train --max-steps, --run-dir, --align-backend;
// preprocess --dataset-dir): it wins over --set, and every message about the key names the flag
// the user typed, not --set or the key alone.
TEST(ConfigOverrides, AToolsFlagIsNamedInTheMessagesAboutItsKey) {
  const Config c = parse_config(kMinimal, "t.yaml", {"run.dir=a", "train.max_steps=5"},
                                {{"--run-dir", "run.dir=b"}, {"--max-steps", "train.max_steps=7"}});
  EXPECT_EQ(c.run.dir, "b");
  EXPECT_EQ(c.train.max_steps, 7);
  EXPECT_EQ(c.origin.at("run.dir"), "--run-dir");
  auto error_with = [](const std::vector<FlagOverride>& flags) {
    try {
      parse_config(kMinimal, "test.yaml", {}, flags);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // a value the key refuses
  EXPECT_EQ(error_with({{"--align-backend", "run.align_backend=gpu"}}).rfind("--align-backend (run.align_backend): ", 0),
            0u)
      << error_with({{"--align-backend", "run.align_backend=gpu"}});
  EXPECT_EQ(error_with({{"--max-steps", "train.max_steps=-3"}}), "--max-steps (train.max_steps): must be >= 0, got -3");
  // a value that is wrong only beside another one (the whole config's check)
  EXPECT_EQ(error_with({{"--sampling-rate", "data.sampling_rate=8000"}, {"--fmax", "data.mel_fmax=7000"}}),
            "--fmax: data.mel_fmax: must not exceed half of data.sampling_rate (4000 Hz)");
}

// Sizes are bounded before the YAML is read into nodes (yaml-cpp spends hundreds of bytes per
// node): an 80 MB config whose train.betas was a 20-million-item list took 35 s and 9.8 GB
// before the schema's "expected a pair of numbers". Each bound names the place and the key.
TEST(ConfigErrors, LongListsAreRefusedBeforeTheyAreRead) {
  std::string list = "[";
  for (int i = 0; i < 200000; ++i) list += "0.9, ";
  list += "0.98]";
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of("data:\n  dataset_dir: corpus\ntrain:\n  seed: 1\n  betas: " + list + "\n"),
            "test.yaml:5: train.betas: a list of more than 64 items; no key takes a list that long "
            "(train.betas takes 2 numbers, data.text_cleaners a few names)");
  // Stopped at item 65, not after reading 200,000 (YAML::Load: about a second and ~100 MB of nodes).
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(200));
  EXPECT_EQ(error_of(kMinimal, {"train.betas=" + list}), "--set train.betas: a value of 1000006 bytes (at most 16384 are read)");
  std::string hundred = "[0.9";
  for (int i = 0; i < 99; ++i) hundred += ", 0.9";
  EXPECT_EQ(error_of(kMinimal, {"train.betas=" + hundred + "]"}),
            "--set train.betas: a list of more than 64 items; no key takes a list that long "
            "(train.betas takes 2 numbers, data.text_cleaners a few names)");

  std::string deep = "x";
  for (int i = 0; i < 20; ++i) deep = "[" + deep + "]";
  EXPECT_EQ(error_of("model:\n  n_heads: " + deep + "\n"),
            "test.yaml:2: model.n_heads: nested more than 8 levels deep; the config nests sections, keys and lists (3 levels)");
  EXPECT_EQ(error_of("run:\n  dir: " + std::string(20000, 'a') + "\n"),
            "test.yaml:2: run.dir: a text of 20000 bytes (at most 16384 are read)");
  std::string keys = "train:\n";
  for (int i = 0; i < 300; ++i) keys += "  k" + std::to_string(i) + ": 1\n";
  EXPECT_EQ(error_of(keys), "test.yaml:2: train: a mapping of more than 256 keys; a section of the config has fewer than 100");
  // What a config really holds is far inside the bounds.
  EXPECT_EQ(error_of(kOfficialBase), "");
}

TEST(ConfigErrors, AnOversizedFileIsRefusedNamingIt) {
  const std::string path = ::testing::TempDir() + "/monoflow_big_config.yaml";
  {
    std::ofstream out(path);
    out << "train:\n  betas: [";
    for (int i = 0; i < 300000; ++i) out << "0.9, ";
    out << "0.98]\n";
  }
  try {
    load_config(path);
    FAIL() << "no error";
  } catch (const monoflow::FileError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find(": the config file is 1.43 MiB; a config is a few KB of keys, and files over 1 MiB "
                                         "are not read; check that this is the config you meant"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
  EXPECT_EQ(error_of_file("/tmp"), "/tmp: is a directory, not a config file; pass a .yaml file");
}

TEST(ConfigErrors, MissingFile) {
  try {
    load_config("/nonexistent/monoflow.yaml");
    FAIL() << "no error";
  } catch (const monoflow::FileError& e) {
    EXPECT_EQ(e.file(), "/nonexistent/monoflow.yaml");
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

// A FIFO as the config: refused at once (issue #28). open() of a FIFO blocks until a writer
// comes, so without the check the load hangs: after 30 s the test opens the FIFO for writing,
// which releases it, and fails.
TEST(ConfigErrors, AFifoIsRefusedNotWaitedOn) {
  char dir[] = "/tmp/monoflow-config-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/config.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::promise<std::string> message;
  std::future<std::string> done = message.get_future();
  std::thread loader([&] {
    try {
      load_config(fifo);
      message.set_value("(no error)");
    } catch (const UserError& e) {
      message.set_value(e.what());
    }
  });
  const bool hung = done.wait_for(std::chrono::seconds(30)) != std::future_status::ready;
  while (done.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  loader.join();
  EXPECT_FALSE(hung);
  EXPECT_NE(done.get().find(fifo + ": is a FIFO (named pipe), not a file"), std::string::npos);
  ::unlink(fifo.c_str());
  ::rmdir(dir);
}

TEST(ConfigPrint, ToYamlReadsBackToTheSameConfig) {
  Config c = parse_config(kMinimal, "t.yaml",
                          {"train.eps=1e-7", "train.betas=[0.8, 0.95]", "model.p_dropout=0.2",
                           "data.text_cleaners=[basic_cleaners]", "run.mas_neg_inf=-1e30"});
  const std::string printed = to_yaml(c);
  EXPECT_NE(printed.find("eps: 1e-07"), std::string::npos) << printed;
  EXPECT_NE(printed.find("p_dropout: 0.2\n"), std::string::npos) << printed;
  Config again = parse_config(printed, "printed.yaml");
  EXPECT_EQ(to_yaml(again), printed);
  EXPECT_DOUBLE_EQ(again.train.eps, 1e-7);
  EXPECT_DOUBLE_EQ(again.run.mas_neg_inf, -1e30);
}

TEST(ConfigPrint, EveryKeyIsPrinted) {
  const std::string printed = to_yaml(parse_config(kMinimal, "t.yaml"));
  for (const auto& key : config_keys()) {
    const std::string name = key.substr(key.find('.') + 1);
    EXPECT_NE(printed.find("  " + name + ":"), std::string::npos) << key;
  }
  EXPECT_EQ(config_keys().size(), 81u);  // a new field in config.h needs its line in the schema
}
