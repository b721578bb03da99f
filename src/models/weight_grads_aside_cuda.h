// Convolutions with their weight gradients on a second stream (compiled only with
// MONOFLOW_HAS_CUDA): the decoder's dilated ones (the WN's in_layers) and the text side's.
// Backward through the layers is a chain: each layer's input gradient waits for the one after
// it, while its weight gradient is needed only at the end (the decoder's weight norm, the
// optimizer). On one stream every weight gradient sat on that chain, cuDNN's with the one-thread
// workspace kernel it runs before each (48 a step in the decoder, ~10 us each on an H100:
// docs/benchmarks.md); here they run beside it.
//
// The protocol, per device (one side stream):
//   - `conv_weight_grad_aside` computes the input gradient on the current stream, lets the
//     current stream wait for the weight gradients forked before, then forks its own: the side
//     stream waits for the current one and computes it there. What it reads (the saved input
//     and weight, the output's gradient) is held until that join, so that its memory is not
//     handed out again before the side stream is done.
//   - `joined_weight(w)`: w itself, whose gradient makes the current stream wait for every
//     weight gradient forked so far. Every weight the one above takes must come through it, so
//     that a weight's gradient reaches its consumers only after a join. Made before the first
//     layer (the decoder's BatchedWeights, conv_bias.h's StepWeights), these joins run after
//     the layers' backward: autograd runs the latest-made ready node first.
// Values are those of torch's own backward (the same cuDNN calls, on another stream).
#pragma once

#include <torch/torch.h>

namespace monoflow::models::cuda {

// Where weight gradients go aside: kNone, kDecoder (the decoder's dilated convolutions) or kAll (also the text side's: models/conv_bias.h's StepWeights), the default. At
// start-up MONOFLOW_WEIGHT_GRADS_ASIDE=0 or =decoder in the environment picks the others; for
// A/B timing, tests and debugging.
enum class WeightGradsAside { kNone, kDecoder, kAll };
void set_weight_grads_aside(WeightGradsAside where);
WeightGradsAside weight_grads_aside();
bool weight_grads_aside_in_decoder();
bool weight_grads_aside_in_text_side();

// A stride-1, ungrouped convolution without bias of x [B, C, T] with w [O, C, K] (conv1d), or of
// time rows x [B, C, 1, T] with w [O, C, 1, K] (conv2d: padding {0, padding}, dilation {1,
// dilation}), with w's gradient on the side stream. x and w in one dtype on one CUDA device;
// w must come from joined_weight().
torch::Tensor conv_weight_grad_aside(const torch::Tensor& x, const torch::Tensor& w, int64_t padding,
                                     int64_t dilation);

// w, whose gradient first waits for the side stream's weight gradients (see above). Its one
// consumer must be conv_weight_grad_aside (views between them only): a second one would have
// its gradient added to the side stream's before the join.
torch::Tensor joined_weight(const torch::Tensor& w);

// For tests: how many weight gradients went to a side stream since start-up; a delay (GPU
// cycles) put on the side stream before each, so that a missing join shows as wrong values.
int64_t weight_grads_forked();
void delay_weight_grads_for_tests(int64_t cycles);

}  // namespace monoflow::models::cuda
