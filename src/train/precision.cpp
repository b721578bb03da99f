#include "train/precision.h"

#include <torch/torch.h>

namespace monoflow::train {

void set_allow_tf32(bool allow) {
  at::globalContext().setFloat32MatmulPrecision(allow ? "high" : "highest");
  at::globalContext().setAllowTF32CuDNN(allow);
}

}  // namespace monoflow::train
