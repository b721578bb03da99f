// Synthesis with the flow decoder's reverse pass replayed as a CUDA graph.
//
// One sentence is thousands of small kernels, so eager inference on a GPU is bound by the host
// launching them (docs/benchmarks.md, "Inference"). The encoder, the durations and the prior
// run eagerly (the output length is read back once, as infer() does anyway); the decoder, the
// bulk of the work, replays a graph recorded once per (batch, frames rounded up to
// frame_multiple, speakers or not). Padding frames are masked in every flow, so the valid
// frames equal GlowTTS::infer's (tests/train/test_graphed_inference.cpp).
//
//   model->eval();
//   GraphedInference synth(model);                 // CUDA model; supported() says where
//   auto out = synth.infer(text, lengths, {}, 0.667, 1.0);   // out.y valid until the next call
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "models/glow_tts.h"

namespace monoflow::train {

class GraphedInference {
 public:
  explicit GraphedInference(models::GlowTTS model, int64_t frame_multiple = 64, size_t max_graphs = 8);
  ~GraphedInference();
  GraphedInference(const GraphedInference&) = delete;
  GraphedInference& operator=(const GraphedInference&) = delete;

  static bool supported(const torch::Device& device);

  // As GlowTTS::infer (no gradient): y [B, n_mels, max_frames] is a view of the graph's output,
  // overwritten by the next call.
  models::InferenceOutput infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                const torch::Tensor& speakers = {}, double noise_scale = 1.0,
                                double length_scale = 1.0);

  size_t graphs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace monoflow::train
