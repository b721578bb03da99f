// Synthesis with the model's inference replayed as CUDA graphs.
//
// One sentence is thousands of small kernels, so eager inference on a GPU is bound by the host
// launching them (docs/benchmarks.md, "Inference"). Three graphs a call:
//   - the encoder and the durations, one graph per (batch, tokens rounded up to 16, speakers or
//     not); then the output length is read back once, as infer() does anyway;
//   - the prior expanded along the durations and sampled, one graph per text graph and frame
//     bucket, reading the text graph's outputs where they lie; the noise is drawn outside it
//     (the same draws as GlowTTS::infer's) and copied in;
//   - the decoder's reverse pass, the bulk of the work, one graph per (batch, frames rounded up
//     to frame_multiple, speakers or not), a batch of utterances as well as one.
// Padding tokens and frames are masked everywhere, so the valid frames equal GlowTTS::infer's
// (tests/infer/test_graphed_inference.cpp).
//
//   model->eval();
//   GraphedInference synth(model);                 // CUDA model; supported() says where
//   auto out = synth.infer(text, lengths, {}, 0.667, 1.0);   // out.y valid until the next call
#pragma once

#include <torch/arg.h>
#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "models/glow_tts.h"

namespace monoflow::train {

struct GraphedInferenceOptions {
  // The decoder's frames are padded up to a multiple of this (a multiple of n_sqz): one graph
  // per bucket.
  TORCH_ARG(int64_t, frame_multiple) = 64;
  // Graphs kept per stage (the prior's over all text graphs), the least recently used dropped.
  TORCH_ARG(size_t, max_graphs) = 8;
  // How many times a shape runs eagerly before its graph is recorded. 0 records at once (a
  // benchmark replaying one shape); synthesis of a file passes 1, since recording costs a
  // warm-up with cuDNN's benchmark mode plus the capture, which a shape seen once never earns back.
  TORCH_ARG(int, eager_uses) = 0;
  // false runs the encoder and the durations eagerly, and with them the prior (bench_inference's
  // graph-decoder mode); graph_prior false only the prior (its graph-text mode).
  TORCH_ARG(bool, graph_text) = true;
  TORCH_ARG(bool, graph_prior) = true;
};

class GraphedInference {
 public:
  // The model's weights must stay as they are while this lives: it turns on
  // models::cache_inference_weights, whose kept inverses its graphs read.
  explicit GraphedInference(models::GlowTTS model, const GraphedInferenceOptions& options = {});
  ~GraphedInference();
  GraphedInference(const GraphedInference&) = delete;
  GraphedInference& operator=(const GraphedInference&) = delete;

  static bool supported(const torch::Device& device);

  // As GlowTTS::infer (no gradient): the tensors are views of the graphs' outputs, overwritten
  // by the next call.
  models::InferenceOutput infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                const torch::Tensor& speakers = {}, double noise_scale = 1.0,
                                double length_scale = 1.0);

  // infer() in its two halves, as GlowTTS::infer_lengths and infer_expand, for a caller that
  // checks the lengths or draws the noise itself (infer/synthesis.h):
  // infer_lengths() replays the text graph; decode() expands and samples the prior (`noise` as
  // infer_expand's: [B, n_mels, max_frames] or undefined) and replays the decoder's graph. The
  // prior replays a graph when `lengths` is infer_lengths()'s last output (its tensors, possibly
  // changed in place); from elsewhere (GlowTTS::infer_lengths) it is expanded eagerly.
  models::InferenceOutput infer_lengths(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                        const torch::Tensor& speakers = {}, double length_scale = 1.0);
  models::InferenceOutput decode(models::InferenceOutput lengths, double noise_scale,
                                 const torch::Tensor& noise = {});

  size_t graphs() const;        // decoder graphs
  size_t text_graphs() const;   // encoder and durations graphs
  size_t prior_graphs() const;  // prior graphs, over every text graph

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace monoflow::train
