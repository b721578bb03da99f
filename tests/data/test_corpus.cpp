// End to end on a slice of the default corpus: scripts/make_corpus.sh renders a few sentences
// with espeak-ng (synthetic tones stand in when espeak-ng is missing), the real text front-end
// encodes them, and the loader batches them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "data/datasets.h"
#include "data/loader.h"
#include "data/text_encoder.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using namespace monoflow::data::testing;

bool have_espeak() { return std::system("command -v espeak-ng > /dev/null 2>&1") == 0; }

TEST(DefaultCorpus, SliceLoadsThroughTheTextFrontEndIntoBatches) {
  TempDir dir;
  const std::string corpus = dir / "corpus";
  const char* root = std::getenv("MONOFLOW_SOURCE_DIR");
  const std::string script = std::string(root ? root : ".") + "/scripts/make_corpus.sh";
  const bool espeak = have_espeak();
  if (espeak) {
    ASSERT_EQ(std::system((script + " " + corpus + " --limit 6 --jobs 2 > /dev/null").c_str()), 0);
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

}  // namespace
