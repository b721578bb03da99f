// Errors a user can cause (config, data, paths, command line). The message names the
// file, line or key and says what to do; entry points print it and exit non-zero.
// Internal invariants use TORCH_CHECK instead.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

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

// A bad value of one option: "<key>: <problem>", the key spelt as in the config file
// ("model.n_heads"), so that the config can say where the key was set (file:line or --set).
class OptionError : public UserError {
 public:
  OptionError(std::string key, std::string problem)
      : UserError(key + ": " + problem), key_(std::move(key)), problem_(std::move(problem)) {}
  const std::string& key() const { return key_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string key_;
  std::string problem_;
};

}  // namespace monoflow
