// The text side's dtype (the text encoder with its duration predictor). Under CUDA bf16 autocast,
// with the setting on, it runs in bf16 end to end: activations, convolution and attention
// products, its fused epilogues, norms and softmax rows, with their arithmetic, statistics,
// biases and norms' affine parameters in float32; the weights' gradients are computed in bf16
// (as under autocast) and cast back to float32, the biases', gammas' and betas' summed in
// float32; its outputs (means, log-scales, log-durations) go back to float32 for the MAS and the
// losses. Elsewhere, and with the setting off, in float32 (autocast itself would add a cast each
// way around nearly every op, so the side is kept out of it).
#pragma once

#include <torch/torch.h>

namespace monoflow::models {

// On by default (train.autocast_text_side in a config, which a training run applies, and the
// benchmarks unless the environment chose); MONOFLOW_TEXT_SIDE_AUTOCAST=1 (true, on) or =0
// (false, off) in the environment at start-up sets it for the benchmarks' A/B.
inline constexpr bool kTextSideAutocastByDefault = true;
void set_text_side_autocast(bool on);
bool text_side_autocast();
// Whether MONOFLOW_TEXT_SIDE_AUTOCAST held one of the values above at start-up.
bool text_side_autocast_set_by_environment();

// The setting `on` while alive, the previous one restored however the scope ends.
class TextSideAutocastScope {
 public:
  explicit TextSideAutocastScope(bool on) : was_(text_side_autocast()) { set_text_side_autocast(on); }
  ~TextSideAutocastScope() { set_text_side_autocast(was_); }
  TextSideAutocastScope(const TextSideAutocastScope&) = delete;
  TextSideAutocastScope& operator=(const TextSideAutocastScope&) = delete;

 private:
  bool was_;
};

// The dtype the text side runs in for input `like`: bf16 where `like` is on a GPU, CUDA autocast
// is on in bf16 and so is the setting; `otherwise` (its parameters' dtype) else.
torch::ScalarType text_side_dtype(const torch::Tensor& like, torch::ScalarType otherwise);

}  // namespace monoflow::models
