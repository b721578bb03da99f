// What the two benchmarks (step_bench.h, infer_bench.h) set up alike: the model of a config's
// model section for a vocabulary, from a fixed seed, on a device, run a number of times to warm
// up and then timed. Each benchmark's options hold one, with its own spec's counts.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/synthetic_batch.h"
#include "models/glow_tts.h"
#include "train/config/config.h"

namespace monoflow::train {

struct BenchSetup {
  BenchSetup(int warmup, int timed) : warmup(warmup), timed(timed) {}

  Config config;  // the model section and train.autocast_text_side are used (ljspeech.yaml for the spec)
  torch::Device device{torch::kCPU};
  int warmup;     // untimed runs first (calls or steps): allocations, algorithm search, graph capture
  int timed;      // then the timed runs, summarised by their median
  int vocab = 148;
  uint64_t seed = kSyntheticSeed;  // the weights' (and the benchmark's inputs') seed
};

// The benchmarked model: LibTorch's generator seeded with setup.seed, then the config's model
// section for setup.vocab symbols, on setup.device (still in training mode). Applies the config's
// train.autocast_text_side, unless MONOFLOW_TEXT_SIDE_AUTOCAST set it (models/text_side_precision.h).
models::GlowTTS bench_model(const BenchSetup& setup);

// Runs `run` `calls` times under the Kineto profiler (CPU ops, and CUDA activity on a GPU), each
// call inside the user scope `scope` (scripts/profile_summary.py reads "monoflow_step",
// scripts/profile_cpu_ops.py "monoflow_call") and synchronised, and writes the Chrome trace to
// `path`. Every op records its inputs' sizes on the CPU, and on a GPU with `shapes_on_gpu` (off
// by default: there they add host time and lower an eager step's GPU busy share).
void profile_calls(const std::string& path, int calls, const torch::Device& device, const char* scope,
                   const std::function<void()>& run, bool shapes_on_gpu = false);

}  // namespace monoflow::train
