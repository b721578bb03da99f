// Recentring a run's boundaries on the mel's spectral change (align --recentre; off by default).
//
// Each run of a model places its boundaries with an offset of its own, the same all along the
// utterance: from -4 to +19 ms over eighteen GPU runs of the quick-start model
// (docs/history/benchmarks-2026-11.md, "Recentring on the spectral change"). The audio tells the offset. Where
// two words meet without a pause, the log-mel changes fastest at a fixed distance from the true
// boundary: averaged over a run's word junctions, the change peaks 1.29 frames after espeak-ng's
// word boundaries in runs without an offset, and one frame earlier for each frame a run is late
// (r = -0.93 over those eighteen runs). So a run's offset is 1.29 frames minus where its peak
// lies, and moving its boundaries by that leaves a spread of about 2 ms between runs.
//
// The 1.29 frames belong to that voice: where the spectral change sits relative to a word
// boundary depends on the voice and on what the reference calls a boundary. On an LJSpeech-text
// corpus spoken by another synthesizer's voice the same correction moved every boundary 5.6 ms
// later and lost 5 points within 25 ms, so align leaves it off unless asked (--recentre). It was
// measured with touching words meeting at the middle of the frames between them (--junction middle).
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

#include "infer/align_export/textgrid.h"
#include "infer/align_export/word_spans.h"

namespace monoflow::train {

// Where the spectral change peaks after a word junction in a run without an offset, in frames:
// measured on the default corpus against espeak-ng's word events (parabolic peak, see above).
inline constexpr double kChangePeakLagFrames = 1.29;

// The spectral change around each word junction, summed over a run's utterances.
class JunctionChange {
 public:
  static constexpr int kReach = 4;  // lags -4 .. +4 frames

  // log_mel: [n_mels, frames], the utterance's own frames. junctions: frames s whose boundary
  // (the one before frame s) is a junction. The change at s is the sum over mel bands of
  // |log_mel[:, s] - log_mel[:, s - 1]|, standardised over the utterance. Junctions too near an
  // end for every lag (s < kReach + 2 or s > frames - 1 - kReach) are left out.
  void add(const torch::Tensor& log_mel, const std::vector<int64_t>& junctions);

  int64_t junctions() const { return count_; }
  // The mean change at lags -kReach .. kReach.
  std::array<double, 2 * kReach + 1> mean() const;
  // The lag in frames where the mean change peaks: a parabola through the largest lag and its
  // neighbours. NaN without junctions or when the largest is at the edge of the reach.
  double peak_lag() const;

 private:
  std::array<double, 2 * kReach + 1> sum_{};
  int64_t count_ = 0;
};

// The frames where two words meet in a word tier (a word interval followed by a word interval).
std::vector<int64_t> word_junctions(const WordIntervals& words);

// The run's offset in frames (positive: its boundaries are late): kChangePeakLagFrames minus the
// peak lag. 0 when it cannot be told: fewer than `min_junctions` junctions, no peak inside the
// reach, or an offset over 3 frames (more than any run measured; something else is wrong).
double run_offset_frames(const JunctionChange& change, int64_t min_junctions);

// Every boundary of every tier moved `seconds` earlier (later when negative), except the grid's
// start and end. Boundaries keep their order, at least 0.1 ms apart, and stay inside the grid.
void shift_boundaries(TextGrid& grid, double seconds);

}  // namespace monoflow::train
