// On-disk mel cache. An entry's key is the audio file (absolute path, size, modification time)
// plus MelOptions::settings_key(): editing the file or changing any feature setting misses the
// old entry. The key only finds the entry: what an entry holds depends on the audio's samples
// and the settings alone (TtsDataset seeds its dither from the samples), so a copied or touched
// corpus recomputes the same mels. Entries are files <dir>/<hh>/<hash>.mel holding the full key
// and a checksum of the whole entry: a hash collision is a miss, and a truncated or damaged
// entry (bytes overwritten, a FIFO in its place) is a miss with a note on stderr, recomputed
// and replaced by the caller; never a wrong mel. Writes are atomic (temp + rename): several
// threads or processes may fill one cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "data/options.h"

namespace monoflow::data {

class FeatureCache {
 public:
  FeatureCache(std::string dir, const MelOptions& options);

  // The key of an audio file under these settings. Throws FileError when it does not exist.
  std::string key(const std::string& audio_path) const;
  std::string entry_path(const std::string& key) const;

  // The cached mel [n_mels, frames] float32, or nullopt on a miss (damaged entries: a note).
  std::optional<torch::Tensor> load(const std::string& key) const;
  // Whether an entry of this format exists for `key` (its first bytes; load() checks the rest).
  bool contains(const std::string& key) const;
  void store(const std::string& key, const torch::Tensor& mel) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string settings_;
};

// 64-bit FNV-1a: entry file names and checksums, and per-utterance dither seeds.
uint64_t fnv1a64(const void* data, size_t size, uint64_t h = 0xcbf29ce484222325ULL);
uint64_t fnv1a64(const std::string& s, uint64_t h = 0xcbf29ce484222325ULL);

}  // namespace monoflow::data
