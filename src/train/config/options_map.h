// Config (config.h) -> the option structs of the libraries the trainer drives.
#pragma once

#include <string>

#include "align/mas.h"
#include "data/options.h"
#include "data/text/text_processor.h"
#include "models/options.h"
#include "train/config/config.h"

namespace monoflow::train {

text::TextOptions text_options(const Config& config);
// cache_dir: the config's data.cache_dir, or <run dir>/cache when it is empty.
data::DataOptions data_options(const Config& config);
data::LoaderOptions loader_options(const Config& config, bool training);
models::GlowTTSOptions model_options(const Config& config, int64_t n_vocab);

// run.device: auto (cuda when available, else cpu) | cpu | cuda | cuda:N. UserError naming
// run.device when CUDA is asked for and absent.
torch::Device resolve_device(const std::string& name);
// run.align_backend: auto (cuda-fast, else cuda on a GPU; cpu otherwise) | cpu | cuda |
// cuda-fast. UserError naming the key when the backend is unavailable, or is a CUDA one while
// training on the CPU.
align::Backend resolve_backend(const std::string& name, const torch::Device& device);
// Every backend that can run on logp living on `device` (the cpu one always).
std::vector<align::Backend> available_backends(const torch::Device& device);

}  // namespace monoflow::train
