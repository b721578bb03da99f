// Alignments of several models combined: each token boundary is the median over the models.
//
// Every run of a Glow-TTS model places its boundaries with an offset of its own, constant along
// the utterance (-10 to +15 ms over twelve runs of one config, docs/accuracy.md, "Alignment
// accuracy"), and one run in a few is far off. The median over three runs keeps the typical
// offset and drops an outlying one.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace monoflow::train {

// durations: one [B, T] int64 tensor per model (frames per token, 0 past each text's length,
// every row summing to that utterance's frames in all of them). Returns [B, T] int64: the
// durations whose cumulative boundaries are, token by token, the lower median of the models'.
// Each token gets at least the fewest frames any model gave it (so at least one, as MAS gives
// every token), and every row's sum is unchanged.
torch::Tensor median_durations(const std::vector<torch::Tensor>& durations);

}  // namespace monoflow::train
