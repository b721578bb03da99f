// Input validation shared by every MAS backend: what a caller can get wrong becomes a
// monoflow::UserError that names the argument and the fix.
#pragma once

#include <cstdint>
#include <string>

#include <torch/types.h>

#include "align/mas.h"

namespace monoflow::align {

// Shapes, dtypes, devices and options; no device synchronisation.
void check_mas_arguments(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                         const torch::Tensor& mel_lengths, const MasOptions& options);

// Length values (host arrays): 1 <= T_b <= S_b, T_b <= T, S_b <= S for every item.
void check_mas_lengths(const int64_t* text_lengths, const int64_t* mel_lengths, int64_t batch,
                       int64_t max_text, int64_t max_mel);

// The message for a non-finite logp value inside item `item`'s alignment band.
std::string nonfinite_message(int64_t item);

}  // namespace monoflow::align
