// The batch the loader yields: padded tensors plus their true lengths.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace monoflow::data {

struct Batch {
  torch::Tensor text;          // [B, T_max] int64, 0-padded
  torch::Tensor text_lengths;  // [B] int64
  torch::Tensor mel;           // [B, n_mels, S_max] float32, 0-padded
  torch::Tensor mel_lengths;   // [B] int64
  torch::Tensor speakers;      // [B] int64; undefined when single-speaker
  std::vector<std::string> ids;
};

// One utterance as it goes into a batch.
struct Sample {
  std::string id;
  torch::Tensor text;  // [T] int64
  torch::Tensor mel;   // [n_mels, S] float32
  int64_t speaker = -1;  // -1: single-speaker
};

// Pads samples into a Batch, ordered by text length, longest first (as the original
// TextMelCollate); ties keep the input order. Speakers are set when any sample has one.
Batch collate(std::vector<Sample> samples);

// The batch with every tensor in page-locked memory (no-op without CUDA).
Batch pin(Batch batch);

}  // namespace monoflow::data
