// A crash names where it happened: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, the
// process writes "<tool>: fatal signal <name>; backtrace:" and the raw stack (glibc's
// backtrace, function names where the dynamic symbol table has them) to stderr, then dies of
// the same signal, so that exit codes and core dumps stay what they would have been.
// Only async-signal-safe calls run inside the handler (write, backtrace_symbols_fd, raise).
#pragma once

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace monoflow {

namespace crash_detail {
inline char* tool_name() {
  static char name[64] = "monoflow";
  return name;
}

inline void write_text(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

inline void on_fatal_signal(int sig) {
  write_text("\n");
  write_text(tool_name());
  write_text(": fatal signal ");
  write_text(sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE"
             : sig == SIGILL ? "SIGILL" : "SIGABRT");
  write_text(" (a bug: please report it with this output); backtrace:\n");
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace crash_detail

inline void install_crash_report(const char* tool) {
  std::strncpy(crash_detail::tool_name(), tool, 63);
  void* warm[1];
  ::backtrace(warm, 1);  // loads libgcc's unwinder now: not inside the handler
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, crash_detail::on_fatal_signal);
}

}  // namespace monoflow
