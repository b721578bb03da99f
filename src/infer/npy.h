// NumPy .npy files (format version 1.0): what a neural vocoder's inference script reads with
// np.load. synthesize --mel-out writes the generated log-mel [n_mels, frames] this way; align
// writes each utterance's durations as int32 [tokens].
#pragma once

#include <torch/torch.h>

#include <string>

namespace monoflow::train {

// The .npy bytes of `t` as little-endian float32 in C order, shape kept (any rank >= 1).
std::string encode_npy_float32(const torch::Tensor& t);
// The same as little-endian int32 ('<i4'); the values must fit (they are converted).
std::string encode_npy_int32(const torch::Tensor& t);

// What the encoders write, read back: a CPU tensor of kFloat32 ('<f4') or kInt32 ('<i4'), C
// order. FileError naming `source` for another format, dtype or layout, or truncated data.
torch::Tensor decode_npy(const std::string& bytes, const std::string& source);

}  // namespace monoflow::train
