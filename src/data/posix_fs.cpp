#include "data/posix_fs.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace monoflow::data::posix {

FileStat stat_path(const std::string& path) {
  struct stat st {};
  FileStat out;
  if (::stat(path.c_str(), &st) != 0) return out;
  out.exists = true;
  out.is_dir = S_ISDIR(st.st_mode);
  out.size = static_cast<int64_t>(st.st_size);
  out.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return out;
}

std::string make_dirs(const std::string& path) {
  if (path.empty()) return "";
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST) return std::strerror(errno);
  }
  return stat_path(path).is_dir ? "" : "not a folder";
}

std::string absolute(const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative()) {
    char buf[4096];
    if (::getcwd(buf, sizeof buf)) p = std::filesystem::path(buf) / p;
  }
  return p.lexically_normal().string();
}

bool rename_file(const std::string& from, const std::string& to) {
  return std::rename(from.c_str(), to.c_str()) == 0;
}

bool remove_file(const std::string& path) { return ::unlink(path.c_str()) == 0; }

void remove_tree(const std::string& path) {
  ::nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

}  // namespace monoflow::data::posix
