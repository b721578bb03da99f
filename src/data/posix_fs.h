// File-system calls for the data library, on POSIX directly. libtorch.so exports its own
// copies of the std::filesystem operations (remove_all, file_size, create_directories, ...);
// calls from our code can bind to them and crash (seen: remove_all jumping to address 0), so
// the data library and its tests avoid std::filesystem operations and keep to fs::path only.
#pragma once

#include <cstdint>
#include <string>

namespace monoflow::data::posix {

struct FileStat {
  bool exists = false;
  bool is_dir = false;
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

FileStat stat_path(const std::string& path);
// mkdir -p; returns an error text, empty on success.
std::string make_dirs(const std::string& path);
// Absolute and lexically normal (no symlink resolution).
std::string absolute(const std::string& path);
bool rename_file(const std::string& from, const std::string& to);
bool remove_file(const std::string& path);
// rm -r (tests and tools).
void remove_tree(const std::string& path);

}  // namespace monoflow::data::posix
