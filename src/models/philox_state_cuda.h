// The CUDA generator's Philox state for the fused kernels' dropout (CUDA builds only): drawn
// once per forward call and kept in the autograd context, so that backward regenerates the
// same mask (kernels/philox_dropout.h).
#pragma once

#include <torch/torch.h>

#include "models/kernels/philox_dropout.h"

namespace monoflow::models::cuda {

// Dropout with probability p for one fused call on `device`: off for p == 0, otherwise the
// generator's next state (advanced by one draw of four per element's subsequence). Graph-safe:
// while a graph is captured the state holds pointers that each replay fills.
kernels::PhiloxDropout start_dropout(double p, const torch::Device& device);

// Forward keeps it in the autograd context; backward takes it back.
void save_dropout(torch::autograd::AutogradContext* ctx, const kernels::PhiloxDropout& dropout);
kernels::PhiloxDropout saved_dropout(torch::autograd::AutogradContext* ctx);

}  // namespace monoflow::models::cuda
