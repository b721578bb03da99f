// Shared helpers of the model tests.
#pragma once

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/glow_tts.h"
#include "models/options.h"

namespace monoflow::models::testing {

inline std::string data_path(const std::string& name) { return std::string(MONOFLOW_MODELS_TEST_DATA) + "/" + name; }

// While alive: cuDNN's deterministic algorithms without its benchmark search (two runs of one
// call give one result) and no TF32 (float32 is float32); the settings restored afterwards.
class ExactCuda {
 public:
  ExactCuda()
      : deterministic_(at::globalContext().deterministicCuDNN()),
        benchmark_(at::globalContext().benchmarkCuDNN()),
        tf32_cudnn_(at::globalContext().allowTF32CuDNN()),
        tf32_cublas_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  ~ExactCuda() {
    at::globalContext().setDeterministicCuDNN(deterministic_);
    at::globalContext().setBenchmarkCuDNN(benchmark_);
    at::globalContext().setAllowTF32CuDNN(tf32_cudnn_);
    at::globalContext().setAllowTF32CuBLAS(tf32_cublas_);
  }
  ExactCuda(const ExactCuda&) = delete;
  ExactCuda& operator=(const ExactCuda&) = delete;

 private:
  bool deterministic_, benchmark_, tf32_cudnn_, tf32_cublas_;
};

// The CPU, and the GPU where there is one: the devices a test compares on.
inline std::vector<torch::Device> devices() {
  std::vector<torch::Device> out{torch::kCPU};
  if (torch::cuda::is_available()) out.emplace_back(torch::kCUDA);
  return out;
}

// A small single-speaker model that exercises every part (prenet, relative attention,
// proj_s, 2 flow blocks with dilation 2).
inline GlowTTSOptions tiny_options() {
  return GlowTTSOptions(/*n_vocab=*/11, /*out_channels=*/4)
      .hidden_channels(8)
      .hidden_channels_enc(8)
      .hidden_channels_dec(8)
      .filter_channels(16)
      .filter_channels_dp(8)
      .n_layers_enc(2)
      .n_heads(2)
      .window_size(2)
      .n_blocks_dec(2)
      .n_block_layers(2)
      .kernel_size_dec(3)
      .dilation_rate(2)
      .mean_only(false)
      .prenet(true);
}

// The configuration of tests/models/data/tiny_*.pt (scripts/models/make_reference.py TINY).
inline GlowTTSOptions tiny_reference_options() { return tiny_options().n_speakers(3).gin_channels(4); }

// Gives every parameter (including zero-initialised ones such as coupling `end` convs) random
// values, so that tests do not pass because a layer is still the identity.
inline void randomize(torch::nn::Module& m, double scale = 0.3) {
  torch::NoGradGuard no_grad;
  for (auto& item : m.named_parameters()) {
    auto& p = item.value();
    const auto& k = item.key();
    if (k.size() >= 6 && k.compare(k.size() - 6, 6, "weight") == 0 && p.dim() == 2 && p.size(0) == p.size(1)) {
      continue;  // keep InvConvNear's invertible init
    }
    auto r = torch::randn(p.sizes(), p.options()) * scale;
    if (k.find("gamma") != std::string::npos) r = r + 1;
    if (k.find(".logs") != std::string::npos) r = r * 0.3;
    p.copy_(r);
  }
}

}  // namespace monoflow::models::testing
