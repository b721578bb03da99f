// Dropout inside the model's fused kernels: what a launcher takes (a plain struct, no torch
// headers but the RNG state's). Every element draws one Philox uniform from (seed, element / 4,
// offset), lane element % 4, so a backward kernel regenerates forward's mask whatever either
// launch's shape; `rng` comes from the CUDA generator (graph-safe: pointers while a graph is
// being captured). Device side: philox_dropout.cuh.
#pragma once

#include <ATen/cuda/PhiloxCudaState.h>  // a plain struct, no torch dependencies

namespace monoflow::models::kernels {

struct PhiloxDropout {
  bool enabled = false;
  float keep = 1.0f;  // 1 - p
  at::PhiloxCudaState rng;
};

}  // namespace monoflow::models::kernels
