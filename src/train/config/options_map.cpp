#include "train/config/options_map.h"

#include "common/error.h"
#include "train/cuda_memory.h"

namespace monoflow::train {

namespace {

// `key` is what the user set: a config key ("run.device") or a flag ("--device").
std::string use(const std::string& key, const std::string& values) {
  return key.rfind("--", 0) == 0 ? "use " + key + " " + values : "use " + key + ": " + values;
}

torch::Device pick_device(const std::string& name, const std::string& key) {
  const bool cuda = torch::cuda::is_available();
  if (name == "auto") return cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!cuda) {
      throw UserError(key + ": '" + name + "' but no CUDA GPU is visible (or this build has no CUDA); " +
                      use(key, "cpu or auto"));
    }
    const torch::Device d(name);
    if (d.has_index() && d.index() >= static_cast<int>(torch::cuda::device_count())) {
      throw UserError(key + ": '" + name + "' but only " + std::to_string(torch::cuda::device_count()) +
                      " GPU(s) are visible");
    }
    return d.has_index() ? d : torch::Device(torch::kCUDA, 0);
  }
  throw UserError(key + ": unknown device '" + name + "'; " + use(key, "auto, cpu, cuda or cuda:N"));
}

}  // namespace

torch::Device resolve_device(const std::string& name, const std::string& key) {
  const torch::Device device = pick_device(name, key);
  if (device.is_cuda()) apply_default_cuda_allocator_settings();  // before the run allocates there
  return device;
}

align::Backend resolve_backend(const std::string& name, const torch::Device& device) {
  using align::Backend;
  if (name == "auto") {
    if (device.is_cuda()) {
      if (align::backend_available(Backend::kCudaFast)) return Backend::kCudaFast;
      if (align::backend_available(Backend::kCuda)) return Backend::kCuda;
    }
    return Backend::kCpu;
  }
  Backend b;
  try {
    b = align::parse_backend(name);
  } catch (const UserError&) {
    throw UserError("run.align_backend (--align-backend): unknown backend '" + name +
                    "'; use auto, cpu, cuda or cuda-fast");
  }
  if (b != Backend::kCpu && !device.is_cuda()) {
    throw UserError("run.align_backend (--align-backend): '" + name + "' needs the model on a GPU, "
                    "but training runs on the CPU; use cpu (or auto)");
  }
  if (!align::backend_available(b)) {
    throw UserError("run.align_backend (--align-backend): '" + name + "' is not available in this "
                    "build or on this machine (CUDA backends need a CUDA build and a GPU); use cpu");
  }
  return b;
}

std::vector<align::Backend> available_backends(const torch::Device& device) {
  std::vector<align::Backend> out{align::Backend::kCpu};
  if (device.is_cuda()) {
    for (const auto b : {align::Backend::kCuda, align::Backend::kCudaFast}) {
      if (align::backend_available(b)) out.push_back(b);
    }
  }
  return out;
}

}  // namespace monoflow::train
