// Padded mel lengths that step around cuDNN's slow shapes, for the graphed step's buckets.
//
// cuDNN 9 picks a much slower engine for the decoder's k-wide convolution at some lengths
// (docs/benchmarks.md, "a cuDNN cliff"): at B = 32 its weight gradient runs 3x slower in bf16
// at 508-516 decoder frames and 4x slower in TF32 at 384, and where the bands lie moves with
// cuDNN's choices between processes. A bucket that lands in one pays it on every replay. So
// before a bucket's graph is recorded, the convolutions (forward and backward, as the decoder
// runs them, recorded as a CUDA graph) are timed at the bucket's length and a few lengths above
// it, and the bucket is padded to the cheapest, counting what the extra frames cost the rest of
// the step.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "common/arg.h"

namespace monoflow::train {

struct BucketLengthOptions {
  // The decoder's WN layers: hidden channels, kernel, dilation rate, layers per block, blocks.
  MONOFLOW_ARG(int64_t, channels) = 192;
  MONOFLOW_ARG(int64_t, kernel_size) = 5;
  MONOFLOW_ARG(int64_t, dilation_rate) = 1;
  MONOFLOW_ARG(int64_t, n_block_layers) = 4;
  MONOFLOW_ARG(int64_t, n_blocks) = 12;
  MONOFLOW_ARG(int64_t, n_sqz) = 2;  // mel frames per decoder frame
  // The convolutions' dtype: bf16 under autocast.
  MONOFLOW_ARG(torch::ScalarType, dtype) = torch::kFloat32;
  // Candidates: decoder frames above the bucket's own length (0: the bucket itself).
  MONOFLOW_ARG(std::vector<int64_t>, extra_frames) = {0, 4, 8, 16};
  MONOFLOW_ARG(int, timed) = 5;  // timed rounds over the candidates, after one untimed
};

// The rest of a step costs about 7x the decoder's k-wide convolutions in bf16 and 2x in TF32
// (the profiles of docs/benchmarks.md). Counting 8x keeps the padding to lengths where the
// convolution is clearly off its usual cost per frame.
inline constexpr double kRestOfStepPerConv = 8.0;

// The decision alone: frames[i] decoder frames (frames[0] the bucket's own), conv_us[i] the
// convolutions' measured time there. Each candidate's cost is its convolutions plus the rest of
// the step's cost of its extra frames, at `rest_per_conv` times the cheapest convolution cost
// per frame. Returns the index of the cheapest (the shortest on ties).
size_t cheapest_length(const std::vector<int64_t>& frames, const std::vector<double>& conv_us,
                       double rest_per_conv = kRestOfStepPerConv);

class BucketLengths {
 public:
  BucketLengths(BucketLengthOptions options, torch::Device device);

  // The mel length to pad a batch of `batch` items to, given its bucket's length `mel_frames`
  // (a multiple of n_sqz): mel_frames or a little more. Measured once per (batch, mel_frames).
  int64_t choose(int64_t batch, int64_t mel_frames);

  // Microseconds of the decoder's k-wide convolutions (all layers, forward and backward) at each
  // of `frames` decoder frames: the fastest of `timed` replays of each length's CUDA graph.
  std::vector<double> conv_us(int64_t batch, const std::vector<int64_t>& frames);

 private:
  BucketLengthOptions options_;
  torch::Device device_;
  std::map<std::pair<int64_t, int64_t>, int64_t> chosen_;
};

}  // namespace monoflow::train
