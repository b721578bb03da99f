// The tools that read a dataset (train, preprocess, align, synthesize's --text-file) against a
// hostile one (issue #28): a FIFO where a wav or metadata.csv belongs is refused, never waited on
// (every tool runs under `timeout`, so a hang fails the test instead of CI); an id that is a
// path is a bad line and nothing is read or written outside the dataset and output folders; a
// repeated wav is named; results do not depend on where the corpus lies.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "test_util.h"
#include "tiny_corpus.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

// A tool run with a bound: `timeout` ends a hung process (exit 124 or 137), stderr with stdout.
std::string bounded(const std::string& command, int* status, int seconds = 120) {
  return testing::run_command("timeout -k 5 " + std::to_string(seconds) + " " + command + " 2>&1", status);
}

// The tiny corpus in dir/corpus with three hostile lines (metadata.csv lines 6, 11, 12):
//   TINY-105's wav is a FIFO; "../../secret" names dir/secret.wav, a wav outside the dataset;
//   TINY-101 comes again with another transcript.
// Returns the corpus folder.
std::string hostile_corpus(const TempDir& dir) {
  const std::string corpus = dir / "corpus";
  testing::write_tiny_corpus(corpus);
  // (No fs::copy_file / fs::remove: libtorch.so exports its own std::filesystem operations.)
  write_file(dir / "secret.wav", testing::read_text(corpus + "/wavs/TINY-100.wav"));
  ::unlink((corpus + "/wavs/TINY-105.wav").c_str());
  EXPECT_EQ(::mkfifo((corpus + "/wavs/TINY-105.wav").c_str(), 0600), 0);
  std::ofstream(corpus + "/metadata.csv", std::ios::app) << "../../secret|hello world.|hello world.\n"
                                                         << "TINY-101|another text.|another text.\n";
  return corpus;
}

// The suite's run: 3 steps of the tiny model on the hostile corpus, which the later tests align
// and synthesize with.
class DataInputs : public testing::SharedCheckpointSuite<DataInputs> {
 public:
  static std::string make_checkpoint(const TempDir& dir) {
    hostile_corpus(dir);
    std::ofstream(dir / "tiny.yaml") << testing::tiny_config_yaml(dir / "corpus", dir / "run", 3);
    int status = 0;
    const std::string out = bounded(std::string(MONOFLOW_TRAIN_EXE) + " --config " + (dir / "tiny.yaml"), &status);
    train_log() = out;
    return dir / "run/checkpoints/ckpt_000000003.pt";
  }
  static std::string& train_log() {
    static std::string log;
    return log;
  }

 protected:
  static std::string corpus() { return *dir_ / "corpus"; }
};

// train under on_bad_line: skip: each line named, the run trains on the rest.
TEST_F(DataInputs, TrainSkipsTheFifoTheEscapingIdAndTheRepeatedWav) {
  const std::string& out = train_log();
  const std::string meta = corpus() + "/metadata.csv";
  EXPECT_TRUE(fs::exists(*checkpoint_)) << out;
  EXPECT_TRUE(has(out, meta + ":11: utterance id '../../secret' holds a path separator ('/')")) << out;
  EXPECT_TRUE(has(out, meta + ":12: utterance 'TINY-101' repeats " + meta + ":2 ('TINY-101')")) << out;
  EXPECT_TRUE(has(out, meta + ":6: " + corpus() + "/wavs/TINY-105.wav: is a FIFO (named pipe), not a file"))
      << out;
  EXPECT_TRUE(has(out, "3 bad line(s) skipped")) << out;
}

// Under on_bad_line: error the first bad line stops train (exit 1), and a FIFO as metadata.csv
// is refused at once, under either policy. Before, both hung in open().
TEST_F(DataInputs, TrainStopsAtTheFirstAndRefusesAFifoAsMetadata) {
  const std::string exe = std::string(MONOFLOW_TRAIN_EXE) + " --config " + (*dir_ / "tiny.yaml");
  int status = 0;
  std::string out = bounded(exe + " --set data.on_bad_line=error --set run.dir=" + (*dir_ / "strict"), &status);
  EXPECT_EQ(exit_code(status), 1) << out;
  EXPECT_TRUE(has(out, "train: error: " + corpus() + "/metadata.csv:11: utterance id '../../secret'")) << out;

  const std::string fifo_corpus = *dir_ / "fifo-corpus";
  fs::create_directories(fifo_corpus + "/wavs");
  ASSERT_EQ(::mkfifo((fifo_corpus + "/metadata.csv").c_str(), 0600), 0);
  out = bounded(exe + " --set data.dataset_dir=" + fifo_corpus + " --set run.dir=" + (*dir_ / "fifo-run"), &status);
  EXPECT_EQ(exit_code(status), 1) << out;
  EXPECT_TRUE(has(out, fifo_corpus + "/metadata.csv: is a FIFO (named pipe), not a file")) << out;
}

TEST_F(DataInputs, PreprocessSkipsTheFifoAndNeverReadsOutside) {
  int status = 0;
  const std::string out = bounded(std::string(MONOFLOW_PREPROCESS_EXE) + " --config " + (*dir_ / "tiny.yaml") +
                                      " --cache-dir " + (*dir_ / "pre-cache") + " -j 2",
                                  &status);
  EXPECT_EQ(exit_code(status), 0) << out;
  EXPECT_TRUE(has(out, "TINY-105.wav: is a FIFO (named pipe), not a file")) << out;
  EXPECT_TRUE(has(out, "utterance id '../../secret' holds a path separator")) << out;
  EXPECT_TRUE(has(out, "preprocess: 9 utterances")) << out;
}

// align: the bad lines are skipped, and no file lands outside --out (before: -o out wrote
// out/../secret.json beside it, i.e. the id's path taken as it was).
TEST_F(DataInputs, AlignSkipsThemAndWritesOnlyInsideItsOutputFolder) {
  ASSERT_TRUE(fs::exists(*checkpoint_)) << train_log();
  const std::string out_dir = *dir_ / "aligned/out";
  int status = 0;
  const std::string out = bounded(std::string(MONOFLOW_ALIGN_EXE) + " --checkpoint " + *checkpoint_ +
                                      " --dataset-dir " + corpus() + " --out " + out_dir +
                                      " --device cpu --images -q",
                                  &status);
  EXPECT_EQ(exit_code(status), 0) << out;
  EXPECT_TRUE(has(out, "is a FIFO (named pipe), not a file")) << out;
  EXPECT_TRUE(has(out, "utterance id '../../secret' holds a path separator")) << out;
  EXPECT_TRUE(has(out, "align: 9 utterances")) << out;
  for (const fs::directory_entry& e : fs::directory_iterator(*dir_ / "aligned")) {
    EXPECT_EQ(e.path().string(), out_dir);  // nothing beside the output folder
  }
  EXPECT_FALSE(fs::exists(*dir_ / "aligned/secret.json"));
  EXPECT_FALSE(fs::exists(out_dir + "/secret.json"));
  // A filelist path may have sub-folders but not lead out of --dataset-dir.
  std::ofstream(*dir_ / "list.txt") << "wavs/TINY-100.wav|hello world.\n../secret.wav|hello world.\n";
  const std::string listed = bounded(std::string(MONOFLOW_ALIGN_EXE) + " --checkpoint " + *checkpoint_ +
                                         " --filelist " + (*dir_ / "list.txt") + " --dataset-dir " + corpus() +
                                         " --out " + (*dir_ / "listed") + " --device cpu -q --set data.on_bad_line=error",
                                     &status);
  EXPECT_EQ(exit_code(status), 1) << listed;
  EXPECT_TRUE(has(listed, (*dir_ / "list.txt") + ":2: audio path '../secret.wav' leads out of " + corpus()))
      << listed;
}

// synthesize --text-file: an id is a file name in --out-dir, never a path.
TEST_F(DataInputs, SynthesizeRefusesIdsThatArePaths) {
  ASSERT_TRUE(fs::exists(*checkpoint_)) << train_log();
  for (const std::string id : {"..", "../up", "a\\b"}) {
    std::ofstream(*dir_ / "lines.txt", std::ios::trunc) << id << "|Hello.\n";
    int status = 0;
    const std::string out = bounded(std::string(MONOFLOW_SYNTHESIZE_EXE) + " --checkpoint " + *checkpoint_ +
                                        " --device cpu --griffin-lim-iters 1 --text-file " + (*dir_ / "lines.txt") +
                                        " --out-dir " + (*dir_ / "synth/out"),
                                    &status);
    EXPECT_EQ(exit_code(status), 1) << out;
    EXPECT_TRUE(has(out, (*dir_ / "lines.txt") + ":1: the id before '|' must be a file name, got '" + id + "'")) << out;
  }
  EXPECT_FALSE(fs::exists(*dir_ / "synth/up.wav"));
  EXPECT_FALSE(fs::exists(*dir_ / "up.wav"));
}

// A non-finite loss names the batch's utterances, so that a bad one can be found.
TEST_F(DataInputs, ANonFiniteLossWarningNamesTheUtterances) {
  int status = 0;
  const std::string out =
      bounded(std::string(MONOFLOW_TRAIN_EXE) + " --config " + (*dir_ / "tiny.yaml") + " --set run.dir=" +
                  (*dir_ / "diverged") + " --set train.learning_rate=1e6 --set train.max_nonfinite_steps=2" +
                  " --set train.val_interval=0 --set train.max_steps=20",
              &status);
  EXPECT_EQ(exit_code(status), 1) << out;
  const size_t at = out.find("warning: non-finite loss at step ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  EXPECT_TRUE(has(line, "; utterances TINY-1")) << line;
}

// step -> loss/mle of a run's training lines.
std::map<int64_t, double> mle_by_step(const std::string& run_dir) {
  std::map<int64_t, double> out;
  std::istringstream in(testing::read_text(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const YAML::Node n = YAML::Load(line);
    if (n["loss/mle"]) out[n["step"].as<int64_t>()] = n["loss/mle"].as<double>();
  }
  return out;
}

// The same corpus in two folders, the second copy touched: the same losses, bit for bit. Before,
// the cached mels' dither was seeded by the cache key (absolute path, size, mtime), and the two
// runs differed at step 1.
TEST(DataInputsCopies, TheSameCorpusElsewhereTrainsIdentically) {
  TempDir dir;
  testing::write_tiny_corpus(dir / "a/corpus");
  testing::write_tiny_corpus(dir / "somewhere/else/corpus");
  struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
  for (const auto& e : fs::directory_iterator(dir / "somewhere/else/corpus/wavs")) {
    ASSERT_EQ(::utimensat(AT_FDCWD, e.path().c_str(), times, 0), 0);
  }
  const std::vector<std::string> quick = {"train.val_interval=0"};
  testing::run(testing::tiny_config(dir / "a/corpus", dir / "run-a", 2, quick));
  testing::run(testing::tiny_config(dir / "somewhere/else/corpus", dir / "run-b", 2, quick));
  const auto a = mle_by_step(dir / "run-a"), b = mle_by_step(dir / "run-b");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a, b);
}

// validation_size at or above the dataset is an error naming the key and the counts (before:
// cut to n - 1 without a word, leaving 1 training utterance).
TEST(DataInputsCopies, AValidationSizeAboveTheDatasetIsAnError) {
  TempDir dir;
  const std::string message = testing::error_of([&] {
    testing::run(testing::tiny_config(testing::suite_corpus(), dir / "run", 1, {"data.validation_size=12"}));
  });
  EXPECT_TRUE(has(message, "data.validation_size: 12 held-out utterances leave none of the 10 usable lines of " +
                               testing::suite_corpus() + "/metadata.csv for training"))
      << message;
}

}  // namespace
}  // namespace monoflow::train
