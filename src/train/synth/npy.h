// NumPy .npy files (format version 1.0): what a neural vocoder's inference script reads with
// np.load. synthesize --mel-out writes the generated log-mel [n_mels, frames] this way.
#pragma once

#include <torch/torch.h>

#include <string>

namespace monoflow::train {

// The .npy bytes of `t` as little-endian float32 in C order, shape kept (any rank >= 1).
std::string encode_npy_float32(const torch::Tensor& t);

}  // namespace monoflow::train
