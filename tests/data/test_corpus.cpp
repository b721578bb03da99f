// End to end on a slice of the default corpus: scripts/make_corpus.sh renders a few sentences
// with espeak-ng (synthetic tones stand in when espeak-ng is missing), the real text front-end
// encodes them, and the loader batches them; and the word timings it writes beside each wav.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "data/audio.h"
#include "data/manifest.h"
#include "data/text/phonemizer.h"

#include "data/datasets.h"
#include "data/loader.h"
#include "data/text_encoder.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using namespace monoflow::data::testing;

bool have_espeak() { return std::system("command -v espeak-ng > /dev/null 2>&1") == 0; }

// The corpus script, run with this build's speak tool.
std::string corpus_command(const std::string& out, int limit) {
  const char* root = std::getenv("MONOFLOW_SOURCE_DIR");
  return std::string("MONOFLOW_SPEAK=") + MONOFLOW_SPEAK_EXE + " " + (root ? root : ".") + "/scripts/make_corpus.sh " +
         out + " --limit " + std::to_string(limit) + " --jobs 2";
}

TEST(DefaultCorpus, SliceLoadsThroughTheTextFrontEndIntoBatches) {
  TempDir dir;
  const std::string corpus = dir / "corpus";
  const bool espeak = have_espeak();
  if (espeak) {
    ASSERT_EQ(std::system((corpus_command(corpus, 6) + " > /dev/null 2>&1").c_str()), 0);
  } else {
    make_synthetic_ljspeech(corpus, {20000, 30000, 25000, 40000, 15000, 22000});
  }
  auto tp = std::make_shared<const monoflow::text::TextProcessor>(monoflow::text::TextOptions{});
  DataOptions o;
  o.dataset_dir = corpus;
  o.validation_size = 2;
  o.on_bad_line = "error";
  auto sets = load_datasets(o, text_encoder(tp));
  ASSERT_EQ(sets.train->size(), 4u);
  ASSERT_EQ(sets.validation->size(), 2u);
  for (size_t i = 0; i < sets.train->size(); ++i) {
    const auto& item = sets.train->item(i);
    EXPECT_EQ(item.text, tp->encode(item.utterance.text));
    if (espeak) EXPECT_GT(item.mel_frames, 40);  // a spoken sentence lasts > 0.5 s
  }
  LoaderOptions lo;
  lo.batch_size = 3;
  lo.num_workers = 2;
  DataLoader loader(sets.train, lo);
  int64_t items = 0;
  while (auto b = loader.next()) {
    items += b->text.size(0);
    EXPECT_EQ(b->mel.size(1), 80);
    // Speech has energy: the loudest band is far above the log floor (-11.5).
    EXPECT_GT(b->mel.max().item<float>(), espeak ? -4.0f : -6.0f);
  }
  EXPECT_EQ(items, 4);
}

struct WordRow {
  std::string word;
  double start = 0, end = 0;
};

std::vector<WordRow> read_word_tsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "word\tstart_s\tend_s") << path;
  std::vector<WordRow> rows;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    WordRow r;
    std::getline(fields, r.word, '\t');
    fields >> r.start >> r.end;
    EXPECT_FALSE(fields.fail()) << path << ": " << line;
    rows.push_back(r);
  }
  return rows;
}

// words/<id>.tsv beside each wav: the sentence's words in order, times increasing, inside the
// wav; a second run renders nothing again.
TEST(DefaultCorpus, WordTimingsLieBesideEachWavInsideItsDuration) {
  if (!monoflow::text::espeak_compiled_in() || !have_espeak()) {
    GTEST_SKIP() << "needs espeak-ng (library and voice data)";
  }
  TempDir dir;
  const std::string corpus = dir / "corpus";
  ASSERT_EQ(std::system((corpus_command(corpus, 4) + " > /dev/null 2>&1").c_str()), 0);
  BadLines bad("error");
  const auto utterances = read_ljspeech(corpus, bad);
  ASSERT_EQ(utterances.size(), 4u);
  for (const Utterance& u : utterances) {
    const auto words = read_word_tsv(corpus + "/words/" + u.id + ".tsv");
    const AudioInfo audio = probe_audio(u.audio_path);
    EXPECT_EQ(audio.sample_rate, 22050);
    const double seconds = static_cast<double>(audio.frames) / audio.sample_rate;
    // Every space-separated piece of the sentence is named by an entry (espeak-ng joins some,
    // "was the", and splits numbers, "7:15" -> "7", "15").
    size_t pieces = 0, named = 0;
    std::istringstream split(u.text);
    for (std::string w; split >> w;) ++pieces;
    for (const WordRow& w : words) {
      std::istringstream in(w.word);
      for (std::string piece; in >> piece;) ++named;
    }
    EXPECT_GE(named, pieces) << u.id;
    EXPECT_LE(words.size(), pieces + 3) << u.id;
    ASSERT_FALSE(words.empty());
    EXPECT_EQ(u.text.rfind(words[0].word, 0), 0u) << u.id << ": the first word is the sentence's";
    double last = 0;
    for (const WordRow& w : words) {
      EXPECT_GE(w.start, last) << u.id << " " << w.word;
      EXPECT_GT(w.end, w.start) << u.id << " " << w.word;
      EXPECT_LE(w.end, seconds + 0.001) << u.id << " " << w.word;  // the TSV has millisecond precision
      last = w.end;
    }
    EXPECT_GT(words.back().end, 0.5 * seconds) << u.id;
  }
  const std::string again = corpus_command(corpus, 4) + " 2>&1";
  FILE* pipe = ::popen(again.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buf[512];
  std::string out;
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  EXPECT_EQ(::pclose(pipe), 0);
  EXPECT_NE(out.find("(0 rendered now)"), std::string::npos) << out;
}

}  // namespace
