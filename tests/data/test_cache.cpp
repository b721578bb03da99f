#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "common/error.h"
#include "data/cache_fill.h"
#include "data/dataset.h"
#include "data/feature_cache.h"
#include "data_test_util.h"

namespace {

using namespace monoflow::data;
using namespace monoflow::data::testing;

TEST(FeatureCache, StoreLoadRoundTrip) {
  TempDir dir;
  write_audio(dir / "a.wav", tone(4000, 440, 22050), 22050);
  FeatureCache cache(dir / "cache", MelOptions{});
  const auto key = cache.key(dir / "a.wav");
  EXPECT_FALSE(cache.load(key).has_value());
  auto mel = torch::randn({80, 17});
  cache.store(key, mel);
  auto back = cache.load(key);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(torch::equal(*back, mel));
  EXPECT_TRUE(posix::stat_path(cache.entry_path(key)).exists);
}

TEST(FeatureCache, SettingsOrFileChangeMisses) {
  TempDir dir;
  write_audio(dir / "a.wav", tone(4000, 440, 22050), 22050);
  MelOptions o;
  FeatureCache cache(dir / "cache", o);
  const auto key = cache.key(dir / "a.wav");
  cache.store(key, torch::zeros({80, 17}));
  MelOptions hop = o;
  hop.hop_length = 200;
  MelOptions fmax = o;
  fmax.mel_fmax = 7600;
  MelOptions noise = o;
  noise.add_noise = false;
  for (const MelOptions& changed : {hop, fmax, noise}) {
    FeatureCache other(dir / "cache", changed);
    EXPECT_NE(other.key(dir / "a.wav"), key);
    EXPECT_FALSE(other.load(other.key(dir / "a.wav")).has_value());
  }
  EXPECT_TRUE(FeatureCache(dir / "cache", o).load(key).has_value());
  // Rewriting the audio (new size, new mtime) changes the key.
  struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};  // mtime: 2001
  ASSERT_EQ(utimensat(AT_FDCWD, (dir / "a.wav").c_str(), times, 0), 0);
  const auto older = cache.key(dir / "a.wav");
  EXPECT_NE(older, key);
  EXPECT_FALSE(cache.load(older).has_value());
  write_audio(dir / "a.wav", tone(4100, 440, 22050), 22050);
  EXPECT_NE(cache.key(dir / "a.wav"), key);
}

TEST(FeatureCache, TruncatedEntryIsAMiss) {
  TempDir dir;
  write_audio(dir / "a.wav", tone(4000, 440, 22050), 22050);
  FeatureCache cache(dir / "cache", MelOptions{});
  const auto key = cache.key(dir / "a.wav");
  cache.store(key, torch::ones({80, 17}));
  const std::string entry = cache.entry_path(key);
  ASSERT_EQ(truncate(entry.c_str(), posix::stat_path(entry).size - 8), 0);
  EXPECT_FALSE(cache.load(key).has_value());
}

// A synthetic LJSpeech corpus in dir/lj with utterances of `samples`, cached in dir/cache.
std::unique_ptr<TtsDataset> cached_corpus(const TempDir& dir, const std::vector<int64_t>& samples) {
  make_synthetic_ljspeech(dir / "lj", samples);
  DataOptions o;
  o.dataset_dir = dir / "lj";
  o.cache_dir = dir / "cache";
  BadLines bad("error");
  return std::make_unique<TtsDataset>(read_ljspeech(o.dataset_dir, bad), o, byte_encoder, bad);
}

TEST(FeatureCache, DatasetFillsAndReusesTheCache) {
  TempDir dir;
  const auto corpus = cached_corpus(dir, {6000, 9000});
  const TtsDataset& ds = *corpus;
  ASSERT_NE(ds.cache(), nullptr);
  EXPECT_TRUE(ds.ensure_cached(0));
  EXPECT_FALSE(ds.ensure_cached(0));
  auto first = ds.get(1, 1);  // miss: computed and stored
  const auto key = ds.cache()->key(ds.item(1).utterance.audio_path);
  auto stored = ds.cache()->load(key);
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(torch::equal(*stored, first.mel));
  // Cached mels are fixed per utterance: another dither seed returns the stored one.
  EXPECT_TRUE(torch::equal(ds.get(1, 2).mel, first.mel));
  // And equal to a fresh computation with the content-derived dither seed.
  EXPECT_TRUE(torch::equal(ds.compute_cached_mel(1), first.mel));
}

TEST(FeatureCache, FillComputesEachUtteranceOnceOnSeveralThreads) {
  TempDir dir;
  const auto corpus = cached_corpus(dir, {6000, 9000, 7000, 5000, 8000});
  const TtsDataset& ds = *corpus;
  CacheFillOptions fill;
  fill.jobs = 3;
  const auto first = fill_feature_cache({&ds, nullptr}, fill);
  EXPECT_EQ(first.utterances, 5u);
  EXPECT_EQ(first.computed, 5u);
  EXPECT_DOUBLE_EQ(first.audio_seconds, ds.stats().audio_seconds);
  // The workers' mels (one intra-op thread each) are the bits this thread computes with as many
  // intra-op threads as a 16-core host gives it: on the 32-core GPU host they were not.
  IntraOpThreads threads(16);
  for (size_t i = 0; i < ds.size(); ++i) {
    const auto key = ds.cache()->key(ds.item(i).utterance.audio_path);
    const auto stored = ds.cache()->load(key);
    ASSERT_TRUE(stored.has_value()) << i;
    EXPECT_TRUE(torch::equal(*stored, ds.compute_cached_mel(i))) << i;
  }
  EXPECT_EQ(fill_feature_cache({&ds}, fill).computed, 0u);  // all cached already
  fill.force = true;
  EXPECT_EQ(fill_feature_cache({&ds}, fill).computed, 5u);
}

// A cache entry with a few bytes overwritten in place (same length) is found by its checksum,
// said, recomputed and replaced; before, it was used as it was.
TEST(FeatureCache, ADamagedEntryIsRecomputedWithANote) {
  TempDir dir;
  const auto corpus = cached_corpus(dir, {6000, 9000});
  const TtsDataset& ds = *corpus;
  ASSERT_TRUE(ds.ensure_cached(1));
  const auto key = ds.cache()->key(ds.item(1).utterance.audio_path);
  const torch::Tensor good = *ds.cache()->load(key);
  const std::string entry = ds.cache()->entry_path(key);
  const int64_t size = posix::stat_path(entry).size;
  {
    const int fd = ::open(entry.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const float garbage = 1234.5f;  // one mel value, in the middle of the data
    ASSERT_EQ(::pwrite(fd, &garbage, sizeof garbage, size / 2), static_cast<ssize_t>(sizeof garbage));
    ::close(fd);
  }
  ASSERT_EQ(posix::stat_path(entry).size, size);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(ds.cache()->load(key).has_value());
  const auto sample = ds.get(1, 99);  // recomputed and stored again
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("note: feature cache entry " + entry + " is damaged (checksum mismatch); recomputing it"),
            std::string::npos)
      << said;
  EXPECT_TRUE(torch::equal(sample.mel, good));
  const auto again = ds.cache()->load(key);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(torch::equal(*again, good));
  // The key holds the audio's path: a byte of it damaged is found as well.
  {
    const int fd = ::open(entry.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "#", 1, 20), 1);
    ::close(fd);
  }
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(ds.cache()->load(key).has_value());
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("checksum mismatch"), std::string::npos);
}

// A FIFO where an entry belongs is a damaged entry, not a hang: recomputed and replaced.
TEST(FeatureCache, AFifoInPlaceOfAnEntryIsReplacedNotWaitedOn) {
  TempDir dir;
  const auto corpus = cached_corpus(dir, {6000});
  const TtsDataset& ds = *corpus;
  const auto key = ds.cache()->key(ds.item(0).utterance.audio_path);
  const std::string entry = ds.cache()->entry_path(key);
  posix::make_dirs(std::filesystem::path(entry).parent_path().string());
  make_fifo(entry);
  ::testing::internal::CaptureStderr();
  const std::string e = error_within([&] { ds.get(0, 1); }, {entry});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(e, "(no error)");
  EXPECT_NE(said.find("is a FIFO (named pipe)"), std::string::npos) << said;
  EXPECT_TRUE(ds.cache()->load(key).has_value());  // a regular entry now
}

// The same corpus in two folders, one copy touched: the keys differ (path, mtime), the cached
// mels do not. Their dither used to be seeded by the key, so the copies trained differently.
TEST(FeatureCache, CachedMelsDependOnTheAudioNotOnItsPathOrTime) {
  TempDir a, b;
  const auto first = cached_corpus(a, {6000, 9000});
  const auto second = cached_corpus(b, {6000, 9000});
  struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (b / "lj/wavs/u1.wav").c_str(), times, 0), 0);
  for (size_t i = 0; i < 2; ++i) {
    const auto ka = first->cache()->key(first->item(i).utterance.audio_path);
    const auto kb = second->cache()->key(second->item(i).utterance.audio_path);
    EXPECT_NE(ka, kb);
    EXPECT_TRUE(torch::equal(first->get(i, 1).mel, second->get(i, 2).mel)) << i;
    EXPECT_TRUE(torch::equal(*first->cache()->load(ka), *second->cache()->load(kb))) << i;
  }
}

TEST(FeatureCache, FillRethrowsTheFirstError) {
  TempDir dir;
  const auto corpus = cached_corpus(dir, {6000, 9000});
  const TtsDataset& ds = *corpus;
  std::remove((dir / "lj/wavs/u1.wav").c_str());
  CacheFillOptions fill;
  fill.jobs = 2;
  EXPECT_THROW(fill_feature_cache({&ds}, fill), monoflow::FileError);
}

}  // namespace
