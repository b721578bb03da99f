#include "infer/align_export/time_ensemble.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace monoflow::train {
namespace {

std::vector<TextGridInterval> words_of_tier(const TextGridTier& tier) {
  std::vector<TextGridInterval> words;
  for (const TextGridInterval& in : tier.intervals) {
    if (!in.text.empty()) words.push_back(in);
  }
  return words;
}

}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) throw UserError("median_of: no values");
  const size_t n = values.size(), mid = n / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

TextGridTier median_word_tier(const std::vector<TextGridTier>& runs, double xmax, double min_pause_s) {
  if (runs.empty()) throw UserError("median_word_tier: no run's tier");
  std::vector<std::vector<TextGridInterval>> words;
  for (const TextGridTier& tier : runs) words.push_back(words_of_tier(tier));
  const size_t n = words.front().size();
  for (const auto& w : words) {
    if (w.size() != n) {
      throw UserError("median_word_tier: the runs have " + std::to_string(n) + " and " + std::to_string(w.size()) +
                      " words");
    }
  }
  std::vector<double> begin(n), end(n);
  for (size_t k = 0; k < n; ++k) {
    std::vector<double> b, e;
    for (const auto& w : words) {
      b.push_back(w[k].xmin);
      e.push_back(w[k].xmax);
    }
    begin[k] = std::clamp(median_of(b), 0.0, xmax);
    end[k] = std::clamp(median_of(e), 0.0, xmax);
  }
  for (size_t k = 0; k + 1 < n; ++k) {
    if (begin[k + 1] - end[k] < min_pause_s) end[k] = begin[k + 1] = (end[k] + begin[k + 1]) / 2;
  }

  TextGridTier out;
  out.name = runs.front().name;
  double at = 0;
  for (size_t k = 0; k < n; ++k) {
    if (begin[k] > at) out.intervals.push_back({at, begin[k], ""});
    out.intervals.push_back({std::max(begin[k], at), std::max(end[k], at), words.front()[k].text});
    at = out.intervals.back().xmax;
  }
  if (at < xmax || out.intervals.empty()) out.intervals.push_back({at, xmax, ""});
  return out;
}

std::vector<int64_t> median_token_frames(const std::vector<TextGridTier>& runs, const FrameTiming& timing,
                                         int64_t frames) {
  if (runs.empty()) throw UserError("median_token_frames: no run's tier");
  const size_t n = runs.front().intervals.size();
  for (const TextGridTier& tier : runs) {
    if (tier.intervals.size() != n) {
      throw UserError("median_token_frames: the runs have " + std::to_string(n) + " and " +
                      std::to_string(tier.intervals.size()) + " tokens");
    }
  }
  const auto tokens = static_cast<int64_t>(n);
  if (tokens == 0 || frames < tokens) {
    throw UserError("median_token_frames: " + std::to_string(frames) + " frames for " + std::to_string(n) + " tokens");
  }
  const double frame_s = static_cast<double>(timing.hop_length) / timing.sampling_rate;
  std::vector<int64_t> out(n);
  int64_t previous = 0;  // the frame where the token begins
  for (int64_t t = 0; t + 1 < tokens; ++t) {
    std::vector<double> ends;
    for (const TextGridTier& tier : runs) ends.push_back(tier.intervals[static_cast<size_t>(t)].xmax);
    // FrameTiming::boundary(f) = (f - 0.5) * frame_s, inverted and rounded to a frame.
    const auto nearest = static_cast<int64_t>(std::llround(median_of(ends) / frame_s + 0.5));
    const int64_t boundary = std::clamp(nearest, previous + 1, frames - (tokens - 1 - t));
    out[static_cast<size_t>(t)] = boundary - previous;
    previous = boundary;
  }
  out.back() = frames - previous;
  return out;
}

}  // namespace monoflow::train
