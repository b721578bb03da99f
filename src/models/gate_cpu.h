// The WaveNet layer's tanh-sigmoid gate on the CPU in float32: one pass each way, where the
// composite (gated_activation_reference) takes tanh, sigmoid and their product forward and four
// ops and a concatenation backward, and ATen's tanh alone costs six times its sigmoid
// (simd_math.h).
#pragma once

#include <torch/torch.h>

namespace monoflow::models {

// x [B, 2H, ...] float32 on the CPU -> tanh(x[:, :H]) * sigmoid(x[:, H:]) [B, H, ...], with its
// backward (the gradient from x saved, not the activations). The AVX2 body and the scalar
// remainder of each row take slightly different roads to the same values (within ~2e-7 of
// torch's); which road an element takes depends on its place in its row alone, not on the
// thread count.
torch::Tensor gated_activation_cpu(const torch::Tensor& x);

// Whether gated_activation_cpu takes x (a float32 CPU tensor with a channel dimension).
bool gate_cpu_applies(const torch::Tensor& x);

}  // namespace monoflow::models
