#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "data/loader.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using namespace monoflow::data::testing;

std::shared_ptr<const TtsDataset> make_dataset(const TempDir& dir, int n, const std::string& cache = "") {
  std::vector<int64_t> lengths;
  for (int i = 0; i < n; ++i) lengths.push_back(2000 + (i * 7919) % 9000);
  make_synthetic_ljspeech(dir / "lj", lengths);
  DataOptions o;
  o.dataset_dir = dir / "lj";
  o.cache_dir = cache;
  BadLines bad("error");
  return std::make_shared<const TtsDataset>(read_ljspeech(o.dataset_dir, bad), o, byte_encoder, bad);
}

LoaderOptions loader_opts(int workers) {
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 77;
  o.num_workers = workers;
  o.prefetch_batches = 3;
  o.bucket_batches = 2;
  return o;
}

void expect_same(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_TRUE(torch::equal(a.text, b.text));
  EXPECT_TRUE(torch::equal(a.text_lengths, b.text_lengths));
  EXPECT_TRUE(torch::equal(a.mel, b.mel));
  EXPECT_TRUE(torch::equal(a.mel_lengths, b.mel_lengths));
}

TEST(DataLoader, PadsAndReportsLengths) {
  TempDir dir;
  auto ds = make_dataset(dir, 10);
  DataLoader loader(ds, loader_opts(2));
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  int items = 0;
  while (auto batch = loader.next()) {
    const int64_t b = batch->text.size(0);
    ASSERT_EQ(batch->mel.size(0), b);
    ASSERT_EQ(batch->mel.size(1), 80);
    EXPECT_FALSE(batch->speakers.defined());
    EXPECT_EQ(batch->mel.size(2), batch->mel_lengths.max().item<int64_t>());
    EXPECT_EQ(batch->text.size(1), batch->text_lengths.max().item<int64_t>());
    for (int64_t i = 0; i < b; ++i) {
      const std::string& id = batch->ids[i];
      const size_t index = std::stoul(id.substr(1));
      const auto& item = ds->item(index);
      const int64_t t = batch->text_lengths[i].item<int64_t>(), s = batch->mel_lengths[i].item<int64_t>();
      EXPECT_EQ(t, static_cast<int64_t>(item.text.size()));
      EXPECT_EQ(s, item.mel_frames);
      EXPECT_TRUE(torch::equal(batch->text[i].narrow(0, 0, t), torch::tensor(item.text, torch::kInt64)));
      EXPECT_EQ(batch->text[i].narrow(0, t, batch->text.size(1) - t).abs().sum().item<int64_t>(), 0);
      EXPECT_EQ(batch->mel[i].narrow(1, s, batch->mel.size(2) - s).abs().sum().item<float>(), 0.0f);
      if (i > 0) EXPECT_GE(batch->text_lengths[i - 1].item<int64_t>(), t);  // longest text first
      ++items;
    }
  }
  EXPECT_EQ(items, 10);
  EXPECT_EQ(loader.position(), (LoaderPosition{1, 0}));
}

TEST(DataLoader, PinsBatchesWhenCudaIsPresent) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: pinning is a no-op";
  TempDir dir;
  auto ds = make_dataset(dir, 4);
  auto o = loader_opts(1);
  DataLoader pinned(ds, o);
  auto b = pinned.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->mel.is_pinned());
  EXPECT_TRUE(b->text.is_pinned());
  EXPECT_TRUE(b->mel_lengths.is_pinned());
  o.pin_memory = false;
  DataLoader plain(ds, o);
  EXPECT_FALSE(plain.next()->mel.is_pinned());
}

std::vector<Batch> take(DataLoader& loader, int n) {
  std::vector<Batch> out;
  while (static_cast<int>(out.size()) < n) {
    if (auto b = loader.next()) out.push_back(std::move(*b));
  }
  return out;
}

TEST(DataLoader, SameBatchesWhateverTheWorkerCount) {
  TempDir dir;
  auto ds = make_dataset(dir, 13);
  DataLoader serial(ds, loader_opts(0)), threaded(ds, loader_opts(3));
  auto a = take(serial, 9), b = take(threaded, 9);  // crosses two epoch boundaries
  for (size_t i = 0; i < a.size(); ++i) expect_same(a[i], b[i]);
}

TEST(DataLoader, ResumesExactlyFromAPosition) {
  TempDir dir;
  auto ds = make_dataset(dir, 13);
  DataLoader first(ds, loader_opts(2));
  take(first, 5);  // epoch 0 has 4 batches: now inside epoch 1
  const LoaderPosition saved = first.position();
  EXPECT_EQ(saved, (LoaderPosition{1, 1}));
  auto expected = take(first, 6);
  DataLoader resumed(ds, loader_opts(2));
  resumed.set_position(saved);
  EXPECT_EQ(resumed.position(), saved);
  auto got = take(resumed, 6);
  for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], expected[i]);
  // Moving back in the same loader works too, and a new epoch orders batches differently.
  resumed.set_position({0, 0});
  auto e0 = take(resumed, 4);
  resumed.set_position({1, 0});
  auto e1 = take(resumed, 4);
  bool differs = false;
  for (int i = 0; i < 4; ++i) differs = differs || e0[i].ids != e1[i].ids;
  EXPECT_TRUE(differs);
  EXPECT_THROW(resumed.set_position({0, 99}), monoflow::UserError);
}

TEST(DataLoader, CachedFeaturesGiveTheSameBatchesTwice) {
  TempDir dir;
  auto ds = make_dataset(dir, 9, dir / "cache");
  DataLoader a(ds, loader_opts(2));
  auto cold = take(a, 3);
  DataLoader b(ds, loader_opts(2));
  auto warm = take(b, 3);
  for (size_t i = 0; i < cold.size(); ++i) expect_same(cold[i], warm[i]);
}

TEST(DataLoader, AWorkerErrorReachesTheCaller) {
  TempDir dir;
  auto ds = make_dataset(dir, 8);
  for (int i = 0; i < 8; ++i) posix::remove_file(dir / ("lj/wavs/u" + std::to_string(i) + ".wav"));
  DataLoader loader(ds, loader_opts(2));
  EXPECT_THROW(loader.next(), monoflow::FileError);
  EXPECT_EQ(loader.position(), (LoaderPosition{0, 0}));  // nothing half-read was consumed
}

TEST(DataLoader, MultiSpeakerBatchesCarrySpeakers) {
  TempDir dir;
  make_synthetic_ljspeech(dir / "lj", {3000, 4000, 5000});
  write_text(dir / "list.txt", "wavs/u0.wav|2|a b\nwavs/u1.wav|0|c\nwavs/u2.wav|1|d e f\n");
  DataOptions o;
  o.dataset_dir = dir / "lj";
  o.n_speakers = 3;
  BadLines bad("error");
  auto ds = std::make_shared<const TtsDataset>(read_filelist(dir / "list.txt", true, 3, o.dataset_dir, bad), o,
                                               byte_encoder, bad);
  auto lo = loader_opts(1);
  lo.batch_size = 3;
  DataLoader loader(ds, lo);
  auto batch = loader.next();
  ASSERT_TRUE(batch.has_value());
  ASSERT_TRUE(batch->speakers.defined());
  EXPECT_EQ(batch->ids, (std::vector<std::string>{"u2", "u0", "u1"}));  // longest text first
  EXPECT_TRUE(torch::equal(batch->speakers, torch::tensor({1, 2, 0}, torch::kInt64)));
}

}  // namespace
