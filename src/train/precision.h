// Numeric precision switches of a training step: TF32 matmuls/convolutions on the GPU, and bf16
// autocast (models/autocast.h).
#pragma once

#include "models/autocast.h"

namespace monoflow::train {

void set_allow_tf32(bool allow);

}  // namespace monoflow::train
