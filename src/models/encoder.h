// The text encoder of Glow-TTS (official models.TextEncoder): embedding scaled by
// sqrt(hidden), optional prenet, relative-position transformer, projections to the prior's
// mean (proj_m) and log-std (proj_s, absent when mean_only), and the duration predictor
// (proj_w) fed with a stop-gradient copy of the encoder output (plus the speaker vector).
#pragma once

#include <torch/torch.h>

#include <tuple>

#include "models/attentions.h"
#include "models/modules.h"
#include "models/options.h"

namespace monoflow::models {

// 2 x (conv(kernel) -> relu -> layer norm -> dropout) -> 1x1 conv to one channel (log-duration).
class DurationPredictorImpl : public torch::nn::Module {
 public:
  DurationPredictorImpl(int64_t in_channels, int64_t filter_channels, int64_t kernel_size, double p_dropout);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& x_mask);  // -> [B,1,T]

 private:
  double p_dropout_;
  torch::nn::Conv1d conv_1{nullptr};
  LayerNorm norm_1{nullptr};
  torch::nn::Conv1d conv_2{nullptr};
  LayerNorm norm_2{nullptr};
  torch::nn::Conv1d proj{nullptr};
};
TORCH_MODULE(DurationPredictor);

struct EncoderOutput {
  torch::Tensor x_m;     // [B, out_channels, T] prior means (masked)
  torch::Tensor x_logs;  // [B, out_channels, T] prior log-stds (zeros when mean_only)
  torch::Tensor logw;    // [B, 1, T] predicted log-durations (masked)
  torch::Tensor x_mask;  // [B, 1, T]
};

class TextEncoderImpl : public torch::nn::Module {
 public:
  explicit TextEncoderImpl(const GlowTTSOptions& options);
  // x: [B,T] int64 token ids; x_lengths: [B]; g: [B, gin, 1] normalised speaker vector or undefined.
  EncoderOutput forward(const torch::Tensor& x, const torch::Tensor& x_lengths, const torch::Tensor& g = {});

 private:
  GlowTTSOptions options_;
  int64_t hidden_;
  torch::nn::Embedding emb{nullptr};
  ConvReluNorm pre{nullptr};
  AttentionEncoder encoder{nullptr};
  torch::nn::Conv1d proj_m{nullptr}, proj_s{nullptr};
  DurationPredictor proj_w{nullptr};
};
TORCH_MODULE(TextEncoder);

}  // namespace monoflow::models
