#include "train/log/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace monoflow::train {

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  }
  return buf;
}

namespace {

// "[#####...............] " for `done` of `total`.
std::string bar(int64_t done, int64_t total) {
  constexpr int kWidth = 20;
  const double frac = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
  const int filled = static_cast<int>(frac * kWidth);
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
}

}  // namespace

std::string format_progress(const ProgressInfo& p, bool with_bar) {
  std::string out;
  char buf[256];
  if (with_bar && p.total_steps > 0) out += bar(p.step, p.total_steps);
  if (p.total_steps > 0) {
    std::snprintf(buf, sizeof buf, "step %lld/%lld", static_cast<long long>(p.step),
                  static_cast<long long>(p.total_steps));
  } else {
    std::snprintf(buf, sizeof buf, "step %lld", static_cast<long long>(p.step));
  }
  out += buf;
  double remaining = p.total_steps > 0 && p.steps_per_s > 0 ? (p.total_steps - p.step) / p.steps_per_s : NAN;
  // A time limit that comes first ends the run first.
  if (p.seconds_left >= 0 && (std::isnan(remaining) || p.seconds_left < remaining)) remaining = p.seconds_left;
  std::snprintf(buf, sizeof buf,
                " | epoch %lld | mle %.4f dur %.4f | lr %.3e | %.2f steps/s", static_cast<long long>(p.epoch),
                p.loss_mle, p.loss_dur, p.lr, p.steps_per_s);
  out += buf;
  if (p.mas_ms > 0) {  // measured under --compare-align only
    std::snprintf(buf, sizeof buf, " | MAS %.1f ms", p.mas_ms);
    out += buf;
  }
  out += " | ETA " + format_eta(remaining);
  if (p.graphs_recorded > 0) {
    std::snprintf(buf, sizeof buf, " | %lld CUDA graph(s) recorded in %.1f s",
                  static_cast<long long>(p.graphs_recorded), p.recording_s);
    out += buf;
  }
  if (p.skipped > 0) out += " | skipped " + std::to_string(p.skipped);
  return out;
}

std::string format_count_progress(const CountProgress& p, bool with_bar) {
  std::string out = with_bar && p.total > 0 ? bar(p.done, p.total) : "";
  char buf[256];
  const double remaining = p.per_s > 0 ? static_cast<double>(p.total - p.done) / p.per_s : NAN;
  std::snprintf(buf, sizeof buf, "%lld/%lld %s | %.1f %s/s | ETA %s", static_cast<long long>(p.done),
                static_cast<long long>(p.total), p.unit.c_str(), p.per_s, p.unit.c_str(),
                format_eta(remaining).c_str());
  return out + buf;
}

ProgressLine::ProgressLine(std::FILE* stream)
    : stream_(stream), live_(isatty(fileno(stream)) != 0) {}

void ProgressLine::update(const ProgressInfo& p) {
  show(format_progress(p, live_));
}

void ProgressLine::update(const CountProgress& p) {
  show(format_count_progress(p, live_));
}

void ProgressLine::show(const std::string& text) {
  if (live_) {
    std::fprintf(stream_, "\r\033[K%s", text.c_str());
    dirty_ = true;
  } else {
    std::fprintf(stream_, "%s\n", text.c_str());
  }
  std::fflush(stream_);
}

void ProgressLine::message(const std::string& text) {
  if (live_ && dirty_) std::fprintf(stream_, "\r\033[K");
  std::fprintf(stream_, "%s\n", text.c_str());
  dirty_ = false;
  std::fflush(stream_);
}

void ProgressLine::finish() {
  if (live_ && dirty_) std::fprintf(stream_, "\n");
  dirty_ = false;
  std::fflush(stream_);
}

}  // namespace monoflow::train
