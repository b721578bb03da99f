#include "bench/bench_setup.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <set>

#include "align/mas_compare.h"
#include "models/text_side_precision.h"
#include "train/config/library_options.h"

namespace monoflow::train {

models::GlowTTS bench_model(const BenchSetup& setup) {
  if (!models::text_side_autocast_set_by_environment()) {
    models::set_text_side_autocast(setup.config.train.autocast_text_side);
  }
  torch::manual_seed(setup.seed);
  models::GlowTTS model(model_options(setup.config, setup.vocab));
  model->to(setup.device);
  return model;
}

void profile_calls(const std::string& path, int calls, const torch::Device& device, const char* scope,
                   const std::function<void()>& run, bool shapes_on_gpu) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device.is_cuda()) activities.insert(ActivityType::CUDA);
  // The input shapes tell one call of an op from another (profile_cpu_ops.py --shapes).
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO,
                                                     /*report_input_shapes=*/shapes_on_gpu || !device.is_cuda());
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  for (int i = 0; i < calls; ++i) {
    RECORD_USER_SCOPE(scope);
    run();
    align::synchronize(device);
  }
  prof::disableProfiler()->save(path);
}

}  // namespace monoflow::train
