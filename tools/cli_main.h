// The one way a tool's main is written: CLI11 options on a CLI::App, then
//
//   int main(int argc, char** argv) {
//     CLI::App app{"What the tool does."};
//     app.add_option(...);
//     return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("train").blank_line(), [&] {
//       ...             // the work; throws what it cannot do
//       return 0;
//     });
//   }
//
// cli_main parses the command line (CLI11's messages and exit codes, --help exits 0) and runs
// the body. --help shows each option's default: the value its variable holds when cli_main is
// called (an option whose default means something else, e.g. -1 for "the config's", says so
// with ->default_str("train.batch_size"), which is kept). What escapes the body becomes a
// message on stderr and an exit code:
//   monoflow::UserError / FileError  "<tool>: error: <what>"           exit 1
//   c10::Error                       "<tool>: internal error: <what>"  exit 3 (no backtrace)
//   any other std::exception         "<tool>: error: <what>"           exit 3
// A fatal signal (a crash) prints a backtrace first (common/crash_report.h).
// Only executables include this header (it brings CLI11 and c10's exception type).
#pragma once

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "common/crash_report.h"
#include "common/error.h"

namespace monoflow {

// How a tool words its errors; the defaults are the common case.
class CliStyle {
 public:
  explicit CliStyle(std::string tool) : tool_(std::move(tool)) {}
  // Text between "<tool>: " and a UserError's message ("error: "; convert_weights: none).
  CliStyle& user_label(std::string label) {
    user_label_ = std::move(label);
    return *this;
  }
  // Start each error message with a line break: a progress line may still be open.
  CliStyle& blank_line(bool on = true) {
    blank_line_ = on;
    return *this;
  }
  // Exit code of a command line CLI11 rejects (0: CLI11's own codes; --help always exits 0).
  CliStyle& usage_exit_code(int code) {
    usage_exit_code_ = code;
    return *this;
  }

  const std::string& tool() const { return tool_; }
  int usage_exit_code() const { return usage_exit_code_; }
  // Writes "[\n]<tool>: <label><what>\n" to stderr.
  void report(const std::string& label, const char* what) const {
    std::fprintf(stderr, "%s%s: %s%s\n", blank_line_ ? "\n" : "", tool_.c_str(), label.c_str(), what);
  }
  void report_user_error(const char* what) const { report(user_label_, what); }

 private:
  std::string tool_;
  std::string user_label_ = "error: ";
  bool blank_line_ = false;
  int usage_exit_code_ = 0;
};

// Runs `body` (returns the exit code) and maps what escapes it, as described above.
template <class Body>
int run_cli_body(const CliStyle& style, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const UserError& e) {  // FileError included: its message already names the place
    style.report_user_error(e.what());
    return 1;
  } catch (const c10::Error& e) {
    style.report("internal error: ", e.what_without_backtrace());
    return 3;
  } catch (const std::exception& e) {
    style.report("error: ", e.what());
    return 3;
  }
}

// Fills every option's default shown by --help from its variable's value now, unless the
// option names its default itself. An empty list shows nothing, as an empty string does.
inline void show_defaults(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (!option->get_default_str().empty()) continue;
    option->capture_default_str();
    if (option->get_default_str() == "[]" || option->get_default_str() == "{}") option->default_str("");
  }
}

// Parses argv with `app` (on failure: CLI11's message and exit code, or style's usage exit
// code), then runs `body` under run_cli_body.
template <class Body>
int cli_main(CLI::App& app, int argc, char** argv, const CliStyle& style, Body&& body) {
  install_crash_report(style.tool().c_str());
  show_defaults(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code != 0 && style.usage_exit_code() != 0 ? style.usage_exit_code() : code;
  }
  return run_cli_body(style, std::forward<Body>(body));
}

}  // namespace monoflow
