// Errors a user can cause (config, data, paths, command line). The message names the
// file, line or key and says what to do; entry points print it and exit non-zero.
// Internal invariants use TORCH_CHECK instead.
#pragma once

#include <stdexcept>
#include <string>

namespace monoflow {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// A problem at a place in a file: "<file>:<line>: <what>". line <= 0 omits the line.
class FileError : public UserError {
 public:
  FileError(std::string file, int line, const std::string& what)
      : UserError(format(file, line, what)), file_(std::move(file)), line_(line) {}
  const std::string& file() const { return file_; }
  int line() const { return line_; }

 private:
  static std::string format(const std::string& file, int line, const std::string& what) {
    return line > 0 ? file + ":" + std::to_string(line) + ": " + what : file + ": " + what;
  }
  std::string file_;
  int line_;
};

}  // namespace monoflow
