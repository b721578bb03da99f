// The inference benchmark of docs/design.md ("Benchmark specifications: Inference"): one
// sentence of 100 symbols (token ids from a fixed seed) to the mel spectrogram, no vocoder,
// with the ljspeech.yaml model in eval mode and noise scale 0.667. The output is about 1,800
// frames: untrained weights predict other durations, so the length scale is set (by bisection
// on the duration predictor's output, which the noise does not touch) to give that length,
// and the frame count is reported. 3 warm-up calls, then the median of 20, the device
// synchronised around each call; per precision (tf32, fp32, bf16 autocast).
//
// Modes: "eager" (GlowTTS::infer, op by op); "graph" (GraphedInference: the encoder and the
// durations, the prior, and the decoder's reverse pass replayed as three CUDA graphs, recorded
// in the first warm-up call); "graph-text" (the prior eager: what its graph saves);
// "graph-decoder" (the decoder's graph alone, the encoder eager: what the text graph saves). The output length is read back
// once in every mode, between encoder and decoder.
// With batch > 1 the same sentence runs `batch` times at once, as synthesize --text-file's
// batches of equal lengths would.
#pragma once

#include <torch/torch.h>

#include <string>

#include "bench/bench_setup.h"

namespace monoflow::train {

struct InferBenchOptions {
  BenchSetup setup{/*warmup=*/3, /*timed=*/20};  // calls; the seed also draws the sentence's tokens
  int symbols = 100;
  int batch = 1;  // the sentence this many times at once (synthesize --text-file's batches); spec: 1
  int target_frames = 1800;
  double noise_scale = 0.667;
  // Non-empty: after the timed calls, `profiled_calls` more run under LibTorch's Kineto
  // profiler (CPU ops, and CUDA activity on a GPU), each inside a "monoflow_call" range; the
  // Chrome trace is written here (scripts/profile_cpu_ops.py sums a CPU trace by op).
  std::string profile_path;
  int profiled_calls = 3;
};

struct InferBenchRow {
  std::string precision;
  std::string mode;          // eager | graph | graph-decoder
  int symbols = 0;
  int batch = 1;
  int frames = 0;            // mel frames of the output (per utterance)
  double length_scale = 0;   // as set to reach target_frames
  double ms = 0;             // median
  double ms_min = 0, ms_p90 = 0, ms_max = 0;
  double frames_per_s = 0;   // batch * frames / median
};

InferBenchRow bench_inference(const InferBenchOptions& options, const std::string& precision,
                              const std::string& mode = "eager");

std::string infer_csv_header();
std::string infer_csv_row(const InferBenchRow& row);

}  // namespace monoflow::train
