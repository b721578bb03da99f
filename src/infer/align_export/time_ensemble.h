// Alignments of runs on different frame grids (data.hop_length, data.win_length) combined in
// time: each word edge and token boundary is the median over the runs, in seconds.
//
// ensemble.h takes its median in frames, which needs one grid. Runs of two hops place their
// word edges with errors of opposite sign (docs/accuracy.md, "Runs of two hops together"), so a
// median over both grids lies closer to the reference than one over either. Each run's word tier
// is taken as align writes it alone (its own frames, junction rule, pause threshold and edges at
// the silence), so that combining adds no rule of its own but the median and the joining of gaps
// too short to be a pause.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/align_export/textgrid.h"
#include "infer/align_export/utterance_files.h"

namespace monoflow::train {

// The median of `values` (the mean of the middle two for an even count): the order of two
// sequences whose values are ordered run by run is kept. UserError when empty.
double median_of(std::vector<double> values);

// The runs' word tiers of one utterance (words and "" pauses, as alignment_textgrid writes them)
// -> one tier over [0, xmax]: the k-th word starts at the median of the runs' k-th starts and
// ends at the median of their ends (clamped to [0, xmax]); two words whose median gap is shorter
// than `min_pause_s` touch at its middle, as align's word tier splits short gaps; longer gaps and
// the time before the first word and after the last are pauses "". Labels are the first run's.
// UserError when the runs' word counts differ (they come from one text front-end's tokens).
TextGridTier median_word_tier(const std::vector<TextGridTier>& runs, double xmax, double min_pause_s);

// The runs' token tiers of one utterance (one interval per token, in seconds) -> frames per token
// on `timing`'s grid, summing to `frames`: each interior boundary is the median of the runs', at
// the nearest frame boundary (FrameTiming::boundary), and every token keeps at least one frame.
// UserError when the runs' token counts differ or `frames` is fewer than the tokens.
std::vector<int64_t> median_token_frames(const std::vector<TextGridTier>& runs, const FrameTiming& timing,
                                         int64_t frames);

}  // namespace monoflow::train
