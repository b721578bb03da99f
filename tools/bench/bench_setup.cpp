#include "bench/bench_setup.h"

#include "train/config/library_options.h"

namespace monoflow::train {

models::GlowTTS bench_model(const BenchSetup& setup) {
  torch::manual_seed(setup.seed);
  models::GlowTTS model(model_options(setup.config, setup.vocab));
  model->to(setup.device);
  return model;
}

}  // namespace monoflow::train
