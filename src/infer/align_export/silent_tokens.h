// The most likely monotonic alignment in which tokens that make no sound of their own (the
// blanks of add_blank, the space token, punctuation) may take no frames at all.
//
// MAS as trained gives every token at least one frame, so between two words that touch in speech
// the blank after the first, the space and the blank before the second hold at least three frames
// (35 ms at hop 256 and 22.05 kHz) that the boundary must be placed inside. Here those tokens are
// skippable: the path may step from a token over any run of skippable tokens to the next one, so
// where the model explains every frame better by the words' own sounds, the junction shrinks to
// the frame where one word's sound gives way to the next. Spoken tokens keep at least one frame.
// Nothing is fitted: the path maximises the model's own log-likelihood under that constraint.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace monoflow::train {

// logp: [tokens, frames] float32 or float64 on the CPU, the log-likelihood of frame j under token
// i's prior (as MAS's). skippable[i]: token i may take no frames. Returns int64 [tokens], frames per
// token, summing to `frames`. Throws UserError if no path exists (more unskippable tokens than
// frames).
torch::Tensor silent_token_durations(const torch::Tensor& logp, const std::vector<bool>& skippable);

}  // namespace monoflow::train
