// The training-step benchmark of docs/design.md ("Benchmark specifications: Training step"),
// exactly:
// synthetic LJSpeech-shaped batches (B = 32; the lengths of common/synthetic_batch.h;
// vocabulary 148; 80 mel channels), the ljspeech.yaml model, eight batches made once from a
// fixed seed and cycled, 5 warm-up steps, then the median of 30 timed steps (forward, MAS,
// backward, clipping, optimizer step) with the device synchronised around each step; per MAS
// backend and precision. MAS milliseconds are measured right after each timed step by running the same
// backend, synchronised, on that step's log-likelihood (the model gives no hook inside its
// forward); they are not part of a separate step.
//
// Two ways to run the step: "eager" (train_step, op by op from the host) and "graph"
// (GraphedTrainStep: the whole step replayed as a CUDA graph; the first step of each batch
// shape records it, inside the warm-up). "graph-fixed" is "graph" with the buckets' lengths
// only rounded, not measured past cuDNN's slow lengths (bucket_lengths.h), for A/B runs.
// "eager-padded" is "eager" on batches padded as the graphed step pads them (text to 16 tokens,
// mel to 64 frames), so that its profile names the ops behind the kernels a graph replays (a
// graph's trace has no ops, and the text side's kernels differ at unpadded lengths). With `profile_path` set, a few more steps after the
// timed ones run under LibTorch's Kineto profiler and its Chrome trace is written there, each
// step inside a "monoflow_step" range (scripts/profile_summary.py reads it).
//
// Data parallelism (docs/design.md, "Two GPUs"): with `distributed` of several ranks every
// process runs the same benchmark on its own batches (the caller makes them from
// synthetic_rank_seed(seed, rank)), rank 0's weights are broadcast after DDI, and the gradients are averaged as the trainer does
// (inside the graph; during backward when eager). Each step is timed on each rank, so a
// step's time includes waiting for the slower rank; samples/s counts every rank's batch.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "align/mas.h"
#include "data/batch.h"
#include "bench/bench_setup.h"
#include "train/distributed/distributed.h"

namespace monoflow::train {

struct StepBenchOptions {
  BenchSetup setup{/*warmup=*/5, /*timed=*/30};  // steps; the seed also makes the batches
  int batch_size = 32;
  int num_batches = 8;
  int n_mels = 80;
  std::string profile_path;    // empty: no profile
  int profiled_steps = 3;
  bool profile_shapes = false;  // record the ops' input sizes on a GPU too (the CPU always does)
  Distributed* distributed = nullptr;  // null or one rank: a single process
};

struct StepBenchRow {
  std::string backend, precision;  // precision: tf32 (float32, TF32 allowed) | fp32 | bf16
  std::string mode;                // eager | eager-padded | graph | graph-fixed
  int batch_size = 0;
  double step_ms = 0;              // median
  double step_ms_min = 0, step_ms_max = 0, step_ms_p90 = 0;
  double mas_ms = 0;               // median
  double peak_memory_mib = 0;      // device memory held (reserved) at most over the timed steps (0 on CPU)
  double warmup_peak_memory_mib = 0;  // tensor memory allocated at most over the warm-up (records the graphs)
  double samples_per_s = 0;        // batch_size / median step
  int nonfinite_steps = 0;         // timed steps whose loss was not finite (should be 0)
  int graphs = 0;                  // CUDA graphs recorded (graph mode)
  int ranks = 1;                   // processes stepping together (data parallelism)
  int64_t mel_frames = 0;          // the last timed step's mel length (padded to its bucket in graph modes)
  int grad_buckets = 0;            // graph modes, several ranks: the gradients' all-reduce buckets
  int buckets_in_backward = 0;     // ... of them started while backward ran
};

std::vector<data::Batch> synthetic_batches(int count, int batch_size, int vocab, int n_mels, uint64_t seed);

// b with its text padded to GraphBuckets' token multiple and its mel to its frame multiple
// (its least common multiple with n_sqz, as GraphedTrainStep takes it), zeros past the lengths, the lengths as they were: the
// shapes the graphed step records, without its measured bucket lengths ("eager-padded").
data::Batch padded_as_graphed(const data::Batch& b, int64_t n_sqz);

// Whether `mode` steps eagerly ("eager", "eager-padded"; the others replay CUDA graphs).
inline bool is_eager_mode(const std::string& mode) { return mode == "eager" || mode == "eager-padded"; }

// mode: "eager", "eager-padded", or "graph" / "graph-fixed" (CUDA only).
StepBenchRow bench_train_step(const StepBenchOptions& options, align::Backend backend, const std::string& precision,
                              const std::string& mode, const std::vector<data::Batch>& batches);

std::string csv_header();
std::string csv_row(const StepBenchRow& row);

}  // namespace monoflow::train
