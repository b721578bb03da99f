#include "infer/align_export/recentre.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace monoflow::train {

void JunctionChange::add(const torch::Tensor& log_mel, const std::vector<int64_t>& junctions) {
  const int64_t frames = log_mel.size(1);
  if (frames < 2 * kReach + 3 || junctions.empty()) return;
  const torch::Tensor mel = log_mel.to(torch::kCPU, torch::kFloat64);
  // change[s] for s >= 1: how much the spectrum moved from frame s - 1 to s.
  torch::Tensor change = (mel.slice(1, 1) - mel.slice(1, 0, frames - 1)).abs().sum(0);
  change = (change - change.mean()) / (change.std() + 1e-9);
  const auto c = change.accessor<double, 1>();  // c[s - 1] is the change at s
  for (const int64_t s : junctions) {
    if (s < kReach + 2 || s > frames - 1 - kReach) continue;
    for (int lag = -kReach; lag <= kReach; ++lag) sum_[lag + kReach] += c[s + lag - 1];
    ++count_;
  }
}

std::array<double, 2 * JunctionChange::kReach + 1> JunctionChange::mean() const {
  std::array<double, 2 * kReach + 1> m{};
  for (size_t i = 0; i < m.size(); ++i) m[i] = count_ > 0 ? sum_[i] / static_cast<double>(count_) : 0.0;
  return m;
}

double JunctionChange::peak_lag() const {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (count_ == 0) return nan;
  const auto m = mean();
  const size_t i = static_cast<size_t>(std::max_element(m.begin(), m.end()) - m.begin());
  if (i == 0 || i + 1 == m.size()) return nan;
  const double left = m[i - 1], top = m[i], right = m[i + 1];
  const double curvature = left - 2 * top + right;
  const double vertex = curvature < 0 ? 0.5 * (left - right) / curvature : 0.0;
  return static_cast<double>(i) - kReach + vertex;
}

std::vector<int64_t> word_junctions(const WordIntervals& words) {
  std::vector<int64_t> out;
  const auto& in = words.intervals;
  for (size_t i = 0; i + 1 < in.size(); ++i) {
    // A kCentre junction half a frame into a frame counts as that frame's start, as kMiddle's.
    if (!in[i].label.empty() && !in[i + 1].label.empty()) out.push_back(static_cast<int64_t>(std::floor(in[i].end)));
  }
  return out;
}

double run_offset_frames(const JunctionChange& change, int64_t min_junctions) {
  if (change.junctions() < std::max<int64_t>(min_junctions, 1)) return 0.0;
  const double peak = change.peak_lag();
  if (!std::isfinite(peak)) return 0.0;
  const double offset = kChangePeakLagFrames - peak;
  return std::abs(offset) > 3.0 ? 0.0 : offset;
}

void shift_boundaries(TextGrid& grid, double seconds) {
  constexpr double kGap = 1e-4;
  for (TextGridTier& tier : grid.tiers) {
    auto& in = tier.intervals;
    if (in.size() < 2) continue;
    // Boundary j sits between interval j - 1 and j (1 <= j < n).
    const size_t n = in.size();
    std::vector<double> b(n + 1);
    b[0] = grid.xmin;
    b[n] = grid.xmax;
    for (size_t j = 1; j < n; ++j) b[j] = std::clamp(in[j].xmin - seconds, grid.xmin, grid.xmax);
    for (size_t j = 1; j < n; ++j) b[j] = std::max(b[j], b[j - 1] + kGap);
    for (size_t j = n - 1; j >= 1; --j) b[j] = std::min(b[j], b[j + 1] - kGap);
    for (size_t j = 0; j < n; ++j) {
      in[j].xmin = b[j];
      in[j].xmax = b[j + 1];
    }
  }
}

}  // namespace monoflow::train
