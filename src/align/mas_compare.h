// A/B check of the MAS backends on one step's log-likelihood: every backend runs on its own
// copy of logp, each is timed (device synchronised around it), and the durations must equal
// the reference's exactly. A mismatch is a UserError naming the batch, the utterance, the
// first token whose duration differs and its frame.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "align/mas.h"

namespace monoflow::align {

struct BackendTiming {
  align::Backend backend;
  double ms = 0;
};

// One training step's MAS, as the A/B check receives it.
struct StepAlignment {
  torch::Tensor logp;          // [B,T,S] float32, on any device
  torch::Tensor text_lengths;  // [B]
  torch::Tensor mel_lengths;   // [B]
  torch::Tensor durations;     // [B,T]: the step's own MAS result, the reference
  align::Backend backend = align::Backend::kCpu;  // the backend that produced it
  std::string label;           // names the batch in messages, e.g. "step 120 (epoch 3, batch 17)"
  std::vector<std::string> ids;  // the utterances (may be empty)
};

// Every backend in `backends` on its own copy of step.logp, timed; a UserError at the first
// duration that differs from step.durations.
std::vector<BackendTiming> compare_backends(const StepAlignment& step, const std::vector<align::Backend>& backends,
                                            float neg_inf);

// Runs one backend, synchronised, producing what the training step's MAS produces (path and
// durations), and returns (durations, milliseconds). keep_input: work on a copy of logp (a
// backend may overwrite it in place); the copy is then part of the time.
std::pair<torch::Tensor, double> timed_durations(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                                                 const torch::Tensor& mel_lengths, align::Backend backend,
                                                 float neg_inf, bool keep_input);

void synchronize(const torch::Device& device);  // no-op on the CPU

}  // namespace monoflow::align
