#include "data/feature_cache.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/error.h"
#include "common/input_file.h"
#include "data/posix_fs.h"

namespace fs = std::filesystem;

namespace monoflow::data {

namespace {
// 002: a checksum after the data (001 entries read as misses and are recomputed).
constexpr char kMagic[8] = {'M', 'F', 'M', 'E', 'L', '0', '0', '2'};

// A damaged entry is a miss that is said once per entry: the caller recomputes and replaces it.
std::nullopt_t damaged(const std::string& entry, const std::string& why) {
  std::cerr << ("note: feature cache entry " + entry + " is damaged (" + why + "); recomputing it\n");
  return std::nullopt;
}

template <typename T>
bool take(const std::string& bytes, size_t& at, T& out) {
  if (bytes.size() - at < sizeof(T)) return false;
  std::memcpy(&out, bytes.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

uint64_t fnv1a64(const void* data, size_t size, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t fnv1a64(const std::string& s, uint64_t h) { return fnv1a64(s.data(), s.size(), h); }

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

bool FeatureCache::contains(const std::string& key) const {
  int fd = -1;
  try {
    fd = open_input_file(entry_path(key), "a feature cache entry");
  } catch (const FileError&) {
    return false;  // not a regular file: load() says so and the entry is recomputed
  }
  if (fd < 0) return false;
  char magic[sizeof kMagic];
  const bool ours = ::read(fd, magic, sizeof magic) == static_cast<ssize_t>(sizeof magic) &&
                    std::memcmp(magic, kMagic, sizeof magic) == 0;
  ::close(fd);
  return ours;
}

std::optional<torch::Tensor> FeatureCache::load(const std::string& key) const {
  const std::string entry = entry_path(key);
  std::string bytes;
  try {
    if (!read_input_file(entry, "a feature cache entry", bytes)) return std::nullopt;  // a miss
  } catch (const FileError& e) {  // a FIFO or a folder in its place: store() replaces a FIFO
    return damaged(entry, e.what());
  }
  // magic, key length, key, n_mels, frames, data, checksum (fnv1a64 of all before it).
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  size_t at = sizeof kMagic;
  uint32_t klen = 0, n_mels = 0, frames = 0;
  if (!take(bytes, at, klen) || bytes.size() - at < klen) return damaged(entry, "truncated");
  const size_t key_at = at;
  at += klen;
  if (!take(bytes, at, n_mels) || !take(bytes, at, frames)) return damaged(entry, "truncated");
  const size_t room = (bytes.size() - at) / sizeof(float);  // bounds n_mels * frames before it is formed
  if (n_mels > 0 && frames > room / n_mels) return damaged(entry, "truncated");
  const size_t data_bytes = static_cast<size_t>(n_mels) * frames * sizeof(float);
  if (bytes.size() != at + data_bytes + sizeof(uint64_t)) {
    return damaged(entry, bytes.size() < at + data_bytes + sizeof(uint64_t) ? "truncated" : "too long");
  }
  uint64_t stored = 0;
  size_t sum_at = at + data_bytes;
  take(bytes, sum_at, stored);
  if (stored != fnv1a64(bytes.data(), at + data_bytes)) return damaged(entry, "checksum mismatch");
  // Another key with the same hash: a plain miss.
  if (bytes.compare(key_at, klen, key) != 0) return std::nullopt;
  auto mel = torch::empty({static_cast<int64_t>(n_mels), static_cast<int64_t>(frames)}, torch::kFloat32);
  std::memcpy(mel.data_ptr<float>(), bytes.data() + at, data_bytes);
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
    std::string bytes(kMagic, sizeof kMagic);
    const auto put = [&bytes](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
    const uint32_t klen = static_cast<uint32_t>(key.size());
    const uint32_t n_mels = static_cast<uint32_t>(m.size(0)), frames = static_cast<uint32_t>(m.size(1));
    put(&klen, 4);
    put(key.data(), klen);
    put(&n_mels, 4);
    put(&frames, 4);
    put(m.data_ptr<float>(), static_cast<size_t>(m.numel()) * sizeof(float));
    const uint64_t sum = fnv1a64(bytes.data(), bytes.size());
    put(&sum, sizeof sum);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw FileError(tmp, 0, "cannot write the feature cache entry (disk full?)");
  }
  if (!posix::rename_file(tmp, target.string())) {
    posix::remove_file(tmp);
    throw FileError(target.string(), 0, "cannot store the feature cache entry");
  }
}

}  // namespace monoflow::data
