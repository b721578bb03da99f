#include "train/config/library_options.h"

#include <filesystem>

namespace monoflow::train {

data::DataOptions data_options(const Config& c) {
  data::DataOptions d = c.data;
  if (d.cache_dir.empty()) d.cache_dir = (std::filesystem::path(c.run.dir) / "cache").string();
  d.split_seed = c.train.seed;
  d.n_sqz = static_cast<int>(c.model.n_sqz());
  return d;
}

data::LoaderOptions loader_options(const Config& c, bool training) {
  data::LoaderOptions l = c.loader;
  l.batch_size = c.train.batch_size;
  l.seed = c.train.seed;
  l.shuffle = training;
  l.drop_last = false;
  l.pin_memory = c.train.use_cuda;
  return l;
}

models::GlowTTSOptions model_options(const Config& c, int64_t n_vocab) {
  models::GlowTTSOptions o = c.model;
  o.n_vocab(n_vocab).out_channels(c.data.mel.n_mel_channels).n_speakers(c.data.n_speakers);
  return o;
}

}  // namespace monoflow::train
