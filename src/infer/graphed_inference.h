// Synthesis with the flow decoder's reverse pass replayed as a CUDA graph.
//
// One sentence is thousands of small kernels, so eager inference on a GPU is bound by the host
// launching them (docs/benchmarks.md, "Inference"). Two graphs a call: the encoder and the
// durations replay one recorded per (batch, tokens rounded up to 16, speakers or not); the
// output length is read back once, as infer() does anyway; the prior is expanded and sampled
// eagerly (a few ops); the decoder, the bulk of the work, replays a graph recorded per (batch,
// frames rounded up to frame_multiple, speakers or not), a batch of utterances as well as one.
// Padding tokens and frames are masked everywhere, so the valid frames equal GlowTTS::infer's
// (tests/infer/test_graphed_inference.cpp).
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
  // eager_uses: how many times a shape runs eagerly before its graph is recorded. 0 records at
  // once (a benchmark replaying one shape); synthesis of a file passes 1, since recording costs a
  // warm-up with cuDNN's benchmark mode plus the capture, which a shape seen once never earns back.
  // graph_text false runs the encoder and the durations eagerly (bench_inference's graph-decoder
  // mode: what the text graph saves).
  explicit GraphedInference(models::GlowTTS model, int64_t frame_multiple = 64, size_t max_graphs = 8,
                            int eager_uses = 0, bool graph_text = true);
  ~GraphedInference();
  GraphedInference(const GraphedInference&) = delete;
  GraphedInference& operator=(const GraphedInference&) = delete;

  static bool supported(const torch::Device& device);

  // As GlowTTS::infer (no gradient): y [B, n_mels, max_frames] is a view of the graph's output,
  // overwritten by the next call.
  models::InferenceOutput infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                const torch::Tensor& speakers = {}, double noise_scale = 1.0,
                                double length_scale = 1.0);

  // GlowTTS::infer_lengths with the encoder and the durations replayed as a graph: the tensors
  // are views of the graph's outputs, overwritten by the next call.
  models::InferenceOutput infer_lengths(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                        const torch::Tensor& speakers = {}, double length_scale = 1.0);

  // The decoder's part of infer(): `prior` from model->infer_prior or infer_expand with
  // frame_multiple(), cut back to prior.max_frames with y filled in.
  models::InferenceOutput decode(models::InferenceOutput prior);
  int64_t frame_multiple() const { return frame_multiple_; }

  size_t graphs() const;       // decoder graphs
  size_t text_graphs() const;  // encoder and durations graphs

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t frame_multiple_;
};

}  // namespace monoflow::train
