// Config (config.h) -> the option records the libraries take, where the config's own record is
// not enough: values one section gives another (train.seed, model.n_sqz, data.n_mel_channels,
// ...) and run-relative defaults. The text front-end takes config.text as it is.
#pragma once

#include <cstdint>

#include "train/config/config.h"

namespace monoflow::train {

// config.data with cache_dir resolved (empty: <run dir>/cache), the split seed (train.seed) and
// the model's n_sqz.
data::DataOptions data_options(const Config& config);
// config.loader with batch_size and seed from the train section; shuffled when training.
data::LoaderOptions loader_options(const Config& config, bool training);
// FlowGenerator(n_vocab, out_channels=data.n_mel_channels, n_speakers=data.n_speakers, **model).
models::GlowTTSOptions model_options(const Config& config, int64_t n_vocab);

}  // namespace monoflow::train
