// A checkpoint's contents copied to host memory, so that the copy can be serialised and written
// while training goes on (checkpoint_writer.h): later steps update the model and the optimizer
// in place and do not touch it. Taking one costs a device-to-host copy of the model and the
// optimizer's moments and one wait for the device (the steps queued before it must finish).
#pragma once

#include <torch/torch.h>

#include "train/checkpoint.h"

namespace monoflow::train {

// Adam (FusedAdam included) only: its moments are copied into a host Adam over the host
// parameters, which writes the same archive. FusedAdam's device step counts must be read
// back first (sync_steps_from_device).
CheckpointContents checkpoint_snapshot(const torch::nn::Module& model, const torch::optim::Adam& optimizer,
                                       const CheckpointState& state);

}  // namespace monoflow::train
