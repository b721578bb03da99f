// Integrity of zip archives (torch.save files and LibTorch archives, our checkpoints): every
// record's bytes lie inside the file and match the CRC-32 the zip stores for them.
//
// LibTorch's zip reader (its miniz) is built without CRC checks, so a checkpoint with flipped
// bytes loaded as if it were sound. verify_zip_records() reads the central directory itself
// and checks each stored record before anything is unpickled. Header-only, no dependencies
// beyond the standard library (the table-driven CRC-32 is the zip / zlib one).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"

namespace monoflow::zip {

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), as zip and zlib's crc32(); pass the
// previous result as `crc` to continue over a further chunk.
inline uint32_t crc32(const void* data, size_t size, uint32_t crc = 0) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// Random access to the archive's bytes: read(offset, n) returns exactly n bytes or throws.
class Bytes {
 public:
  using ReadFn = std::function<void(uint64_t offset, size_t n, char* out)>;
  Bytes(uint64_t size, ReadFn read) : size_(size), read_(std::move(read)) {}
  uint64_t size() const { return size_; }
  std::string read(uint64_t offset, size_t n) const {
    std::string out(n, '\0');
    if (n > 0) read_(offset, n, out.data());
    return out;
  }

 private:
  uint64_t size_;
  ReadFn read_;
};

namespace detail {

inline uint64_t le(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

inline std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

struct Record {
  std::string name;
  uint16_t method = 0;  // 0: stored (torch always stores)
  uint32_t crc = 0;
  uint64_t size = 0;    // compressed size: the bytes in the file
  uint64_t local_header = 0;
};

// The central directory's position and entry count, from the end record (zip64 when needed).
inline void find_central_directory(const Bytes& f, const std::string& source, uint64_t* offset,
                                   uint64_t* entries) {
  const auto corrupt = [&](const std::string& what) { throw FileError(source, 0, "corrupt zip archive: " + what); };
  if (f.size() < 22) corrupt("too short to be a zip archive (" + std::to_string(f.size()) + " bytes)");
  const uint64_t tail_size = std::min<uint64_t>(f.size(), 22 + 65535);
  const std::string tail = f.read(f.size() - tail_size, tail_size);
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
    if (le(tail, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) corrupt("no end-of-central-directory record (truncated file?)");
  *entries = le(tail, eocd + 10, 2);
  *offset = le(tail, eocd + 16, 4);
  if (*entries == 0xFFFF || *offset == 0xFFFFFFFFu) {  // zip64: the locator sits just before
    if (eocd < 20 || le(tail, eocd - 20, 4) != 0x07064b50) corrupt("zip64 locator missing");
    const uint64_t z64 = le(tail, eocd - 20 + 8, 8);
    if (z64 + 56 > f.size()) corrupt("zip64 end record past the end of the file");
    const std::string rec = f.read(z64, 56);
    if (le(rec, 0, 4) != 0x06064b50) corrupt("bad zip64 end record");
    *entries = le(rec, 32, 8);
    *offset = le(rec, 48, 8);
  }
  if (*offset >= f.size()) corrupt("central directory offset past the end of the file");
}

// Reads the central directory entries (names, CRCs, sizes, local header offsets).
inline std::vector<Record> read_central_directory(const Bytes& f, const std::string& source) {
  const auto corrupt = [&](const std::string& what) { throw FileError(source, 0, "corrupt zip archive: " + what); };
  uint64_t pos = 0, entries = 0;
  find_central_directory(f, source, &pos, &entries);
  std::vector<Record> out;
  for (uint64_t e = 0; e < entries; ++e) {
    if (pos + 46 > f.size()) corrupt("central directory runs past the end of the file");
    const std::string h = f.read(pos, 46);
    if (le(h, 0, 4) != 0x02014b50) corrupt("bad central directory entry " + std::to_string(e));
    Record r;
    r.method = static_cast<uint16_t>(le(h, 10, 2));
    r.crc = static_cast<uint32_t>(le(h, 16, 4));
    r.size = le(h, 20, 4);
    uint64_t uncompressed = le(h, 24, 4);
    const uint64_t name_len = le(h, 28, 2), extra_len = le(h, 30, 2), comment_len = le(h, 32, 2);
    r.local_header = le(h, 42, 4);
    if (pos + 46 + name_len + extra_len > f.size()) corrupt("central directory runs past the end of the file");
    r.name = f.read(pos + 46, name_len);
    // zip64 extra field (id 1): the 8-byte values of the fields that hold 0xFFFFFFFF, in order.
    const std::string extra = f.read(pos + 46 + name_len, extra_len);
    for (size_t x = 0; x + 4 <= extra.size();) {
      const uint64_t id = le(extra, x, 2), len = le(extra, x + 2, 2);
      if (x + 4 + len > extra.size()) break;
      if (id == 1) {
        size_t at = x + 4;
        auto next = [&](uint64_t* field) {
          if (*field == 0xFFFFFFFFu && at + 8 <= x + 4 + len) {
            *field = le(extra, at, 8);
            at += 8;
          }
        };
        next(&uncompressed);
        next(&r.size);
        next(&r.local_header);
      }
      x += 4 + len;
    }
    out.push_back(std::move(r));
    pos += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// Checks one record: its local header, that its bytes lie inside the file, and its CRC-32.
inline void verify_record(const Bytes& f, const Record& r, const std::string& source) {
  const auto corrupt = [&](const std::string& what) {
    throw FileError(source, 0, "corrupt file: record '" + r.name + "' " + what);
  };
  if (r.local_header + 30 > f.size()) corrupt("starts past the end of the file (truncated?)");
  const std::string h = f.read(r.local_header, 30);
  if (le(h, 0, 4) != 0x04034b50) corrupt("has no valid local header");
  const uint64_t data = r.local_header + 30 + le(h, 26, 2) + le(h, 28, 2);
  if (data > f.size() || r.size > f.size() - data) corrupt("runs past the end of the file (truncated?)");
  if (r.method != 0) return;  // compressed: torch never writes these, and its reader checks them
  uint32_t crc = 0;
  constexpr uint64_t kChunk = 1 << 20;
  for (uint64_t done = 0; done < r.size; done += kChunk) {
    const std::string chunk = f.read(data + done, static_cast<size_t>(std::min(kChunk, r.size - done)));
    crc = crc32(chunk.data(), chunk.size(), crc);
  }
  if (crc != r.crc) {
    corrupt("fails its CRC-32 check (stored " + hex32(r.crc) + ", computed " + hex32(crc) +
            "): its bytes changed after it was written (disk, copy or transfer damage)");
  }
}

}  // namespace detail

// Throws FileError(source, ...) naming the first record that lies outside the file or whose
// bytes do not match their CRC-32, or what is wrong with the zip structure; `advice`, when
// given, is appended to the message.
inline void verify_records(const Bytes& f, const std::string& source, const std::string& advice = "") {
  try {
    for (const auto& r : detail::read_central_directory(f, source)) detail::verify_record(f, r, source);
  } catch (const FileError& e) {
    if (advice.empty()) throw;
    const std::string what = e.what(), prefix = e.file() + ": ";
    const std::string detail = what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
    throw FileError(e.file(), e.line(), detail + "; " + advice);
  }
}

inline void verify_records(const char* data, size_t size, const std::string& source) {
  verify_records(Bytes(size, [data](uint64_t offset, size_t n, char* out) { std::memcpy(out, data + offset, n); }),
                 source);
}

// The file at `path`, read piecewise (a checkpoint need not fit in memory twice).
inline void verify_file_records(const std::string& path, const std::string& advice = "") {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw FileError(path, 0, "cannot open the file");
  const auto size = static_cast<uint64_t>(in.tellg());
  verify_records(Bytes(size,
                       [&](uint64_t offset, size_t n, char* out) {
                         in.seekg(static_cast<std::streamoff>(offset));
                         if (!in.read(out, static_cast<std::streamsize>(n))) {
                           throw FileError(path, 0, "read error at byte " + std::to_string(offset));
                         }
                       }),
                 path, advice);
}

}  // namespace monoflow::zip
