// On-disk mel cache. An entry's key is the audio file (absolute path, size, modification time)
// plus MelOptions::settings_key(): editing the file or changing any feature setting misses the
// old entry. Entries are files <dir>/<hh>/<hash>.mel holding the full key, so a hash collision
// or a truncated file reads as a miss, never as a wrong mel. Writes are atomic (temp + rename):
// several threads or processes may fill one cache.
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

  // The cached mel [n_mels, frames] float32, or nullopt on a miss.
  std::optional<torch::Tensor> load(const std::string& key) const;
  void store(const std::string& key, const torch::Tensor& mel) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string settings_;
};

// 64-bit FNV-1a, also used to derive per-utterance dither seeds.
uint64_t fnv1a64(const std::string& s, uint64_t h = 0xcbf29ce484222325ULL);

}  // namespace monoflow::data
