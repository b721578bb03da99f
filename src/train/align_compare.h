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

namespace monoflow::train {

struct BackendTiming {
  align::Backend backend;
  double ms = 0;
};

// logp [B,T,S] float32 on any device; reference_durations [B,T] (the step's own MAS result).
// batch_label names the batch in messages (e.g. "step 120 (epoch 3, batch 17)"), ids the
// utterances (may be empty).
std::vector<BackendTiming> compare_backends(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                                            const torch::Tensor& mel_lengths,
                                            const torch::Tensor& reference_durations,
                                            align::Backend reference_backend,
                                            const std::vector<align::Backend>& backends, float neg_inf,
                                            const std::string& batch_label,
                                            const std::vector<std::string>& ids);

// Runs one backend, synchronised, producing what the training step's MAS produces (path and
// durations), and returns (durations, milliseconds). keep_input: work on a copy of logp (a
// backend may overwrite it in place); the copy is then part of the time.
std::pair<torch::Tensor, double> timed_durations(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                                                 const torch::Tensor& mel_lengths, align::Backend backend,
                                                 float neg_inf, bool keep_input);

void synchronize(const torch::Device& device);  // no-op on the CPU

}  // namespace monoflow::train
