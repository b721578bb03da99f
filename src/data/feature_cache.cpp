#include "data/feature_cache.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/error.h"
#include "data/posix_fs.h"

namespace fs = std::filesystem;

namespace monoflow::data {

namespace {
constexpr char kMagic[8] = {'M', 'F', 'M', 'E', 'L', '0', '0', '1'};

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

uint64_t fnv1a64(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

FeatureCache::FeatureCache(std::string dir, const MelOptions& options)
    : dir_(std::move(dir)), settings_(options.settings_key()) {
  const std::string err = posix::make_dirs(dir_);
  if (!err.empty()) throw FileError(dir_, 0, "cannot create the feature cache folder: " + err);
}

std::string FeatureCache::key(const std::string& audio_path) const {
  const auto st = posix::stat_path(audio_path);
  if (!st.exists) throw FileError(audio_path, 0, "cannot stat audio (missing?)");
  std::ostringstream k;
  k << posix::absolute(audio_path) << "|" << st.size << "|" << st.mtime_ns << "|" << settings_;
  return k.str();
}

std::string FeatureCache::entry_path(const std::string& key) const {
  const std::string h = hex16(fnv1a64(key));
  return (fs::path(dir_) / h.substr(0, 2) / (h + ".mel")).string();
}

std::optional<torch::Tensor> FeatureCache::load(const std::string& key) const {
  std::ifstream in(entry_path(key), std::ios::binary);
  if (!in) return std::nullopt;
  char magic[8];
  uint32_t klen = 0, n_mels = 0, frames = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return std::nullopt;
  if (!in.read(reinterpret_cast<char*>(&klen), 4) || klen != key.size()) return std::nullopt;
  std::string stored(klen, '\0');
  if (!in.read(stored.data(), klen) || stored != key) return std::nullopt;
  if (!in.read(reinterpret_cast<char*>(&n_mels), 4) ||
      !in.read(reinterpret_cast<char*>(&frames), 4)) {
    return std::nullopt;
  }
  auto mel = torch::empty({static_cast<int64_t>(n_mels), static_cast<int64_t>(frames)},
                          torch::kFloat32);
  const std::streamsize bytes = static_cast<std::streamsize>(mel.numel() * sizeof(float));
  if (!in.read(reinterpret_cast<char*>(mel.data_ptr<float>()), bytes)) return std::nullopt;
  return mel;
}

void FeatureCache::store(const std::string& key, const torch::Tensor& mel) const {
  TORCH_CHECK(mel.dim() == 2, "FeatureCache::store: mel must be [n_mels, frames]");
  const auto m = mel.to(torch::kCPU, torch::kFloat32).contiguous();
  const fs::path target = entry_path(key);
  posix::make_dirs(target.parent_path().string());
  static std::atomic<uint64_t> counter{0};
  std::ostringstream tmp_name;
  tmp_name << target.string() << ".tmp." << std::hash<std::thread::id>{}(std::this_thread::get_id())
           << "." << counter++ << "." << ::getpid();
  const std::string tmp = tmp_name.str();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const uint32_t klen = static_cast<uint32_t>(key.size());
    const uint32_t n_mels = static_cast<uint32_t>(m.size(0)), frames = static_cast<uint32_t>(m.size(1));
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&klen), 4);
    out.write(key.data(), klen);
    out.write(reinterpret_cast<const char*>(&n_mels), 4);
    out.write(reinterpret_cast<const char*>(&frames), 4);
    out.write(reinterpret_cast<const char*>(m.data_ptr<float>()),
              static_cast<std::streamsize>(m.numel() * sizeof(float)));
    if (!out) throw FileError(tmp, 0, "cannot write the feature cache entry (disk full?)");
  }
  if (!posix::rename_file(tmp, target.string())) {
    posix::remove_file(tmp);
    throw FileError(target.string(), 0, "cannot store the feature cache entry");
  }
}

}  // namespace monoflow::data
