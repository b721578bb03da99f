// Config (config.h) -> what the trainer drives: the libraries' option records
// (library_options.h, without LibTorch) and the devices, which need LibTorch (here).
#pragma once

#include <string>
#include <vector>

#include "align/mas.h"
#include "train/config/config.h"
#include "train/config/library_options.h"

namespace monoflow::train {

// run.device: auto (cuda when available, else cpu) | cpu | cuda | cuda:N. UserError naming
// `key` (what the user set: run.device, or a tool's flag such as --device) when CUDA is asked
// for and absent. Where a GPU is visible, it also applies the allocator defaults
// (cuda_memory.h) before anything is allocated there.
torch::Device resolve_device(const std::string& name, const std::string& key = "run.device");
// run.align_backend: auto (cuda-fast, else cuda on a GPU; cpu otherwise) | cpu | cuda |
// cuda-fast. UserError naming the key when the backend is unavailable, or is a CUDA one while
// training on the CPU.
align::Backend resolve_backend(const std::string& name, const torch::Device& device);
// Every backend that can run on logp living on `device` (the cpu one always).
std::vector<align::Backend> available_backends(const torch::Device& device);

}  // namespace monoflow::train
