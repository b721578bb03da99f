// Opening input files so that nothing hangs. open() of a FIFO blocks until a writer comes
// (forever, in a dataset), a character device may never end, and a directory opens as an empty
// stream; a dataset assembled by scripts can hold any of them. open_input_file() opens
// non-blocking, which cannot block on a FIFO, and refuses whatever fstat() of that same
// descriptor says is not a regular file, so the check and the read see the same file.
// POSIX; header-only.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.h"

namespace monoflow {

// What a non-regular file is, in words.
inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// A read-only descriptor (O_CLOEXEC, blocking again) of the regular file `path`. Returns -1
// with errno set when open() fails, for the caller's own "cannot open" message; throws
// FileError(path, "is a FIFO (named pipe), not a file: <what>") for anything but a regular file.
inline int open_input_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FileError(path, 0, std::string("is ") + file_kind(st.st_mode) + ", not a file: " + what);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// Reads the regular file `path` into `out`, at most `max_bytes` of it. Returns false with errno
// set when open() fails; throws FileError for a file that is not regular (open_input_file) or a
// read error.
inline bool read_input_file(const std::string& path, const std::string& what, std::string& out,
                            size_t max_bytes = SIZE_MAX) {
  const int fd = open_input_file(path, what);
  if (fd < 0) return false;
  out.clear();
  char buf[1 << 16];
  while (out.size() < max_bytes) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, max_bytes - out.size()));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw FileError(path, 0, "cannot read (" + why + "): " + what);
    }
  }
  ::close(fd);
  return true;
}

}  // namespace monoflow
