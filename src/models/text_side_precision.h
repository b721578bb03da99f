// The text side's dtype (the text encoder with its duration predictor). Under CUDA autocast it
// runs in autocast's dtype end to end: activations, convolution and attention products, its
// fused epilogues, norms and softmax rows in bf16, with their arithmetic, statistics, biases,
// norms' affine parameters and every parameter's gradient in float32, and its outputs (means,
// log-scales, log-durations) cast back to float32 for the MAS and the losses. Elsewhere, and
// with the setting off, in float32 (as before 2026-12-06: autocast would add a cast each way
// around nearly every op, so the side was kept out of it).
#pragma once

#include <torch/torch.h>

namespace monoflow::models {

// Off by default (train.autocast_text_side in a config); MONOFLOW_TEXT_SIDE_AUTOCAST=1 or =0 in
// the environment at start-up sets it for programs without a config (bench_train_step's A/B).
inline constexpr bool kTextSideAutocastByDefault = false;
void set_text_side_autocast(bool on);
bool text_side_autocast();

// The dtype the text side runs in for input `like`: CUDA autocast's where `like` is on a GPU,
// CUDA autocast is on and so is the setting; `otherwise` (its parameters' dtype) else.
torch::ScalarType text_side_dtype(const torch::Tensor& like, torch::ScalarType otherwise);

}  // namespace monoflow::models
