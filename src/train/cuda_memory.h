// The CUDA caching allocator's settings for a run on a GPU.
//
// monoflow asks for expandable segments unless the user configured the allocator through
// PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF (their setting then stands, "expandable_
// segments:False" included). With them, each memory pool (the CUDA graphs' one included) grows
// as one mapped range instead of separate cudaMalloc segments that cannot merge: the graphed
// ljspeech.yaml step holds ~100 MiB less at the same speed (docs/benchmarks.md).
#pragma once

#include <string>

namespace monoflow::train {

// The settings string to apply given the two environment variables (null: unset): empty when
// the user set either, else "expandable_segments:True".
std::string default_cuda_allocator_settings(const char* cuda_alloc_conf, const char* alloc_conf);

// Applies default_cuda_allocator_settings of this process's environment, once (later calls do
// nothing). Called by resolve_device when a run picks a GPU.
void apply_default_cuda_allocator_settings();

}  // namespace monoflow::train
