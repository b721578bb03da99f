#include "train/cuda_memory.h"

#include <c10/core/AllocatorConfig.h>

#include <cstdlib>
#include <mutex>

namespace monoflow::train {

std::string default_cuda_allocator_settings(const char* cuda_alloc_conf, const char* alloc_conf) {
  const auto set = [](const char* v) { return v != nullptr && *v != '\0'; };
  // Applying a settings string resets every key it does not name, so a user's own
  // configuration is left alone entirely rather than merged.
  if (set(cuda_alloc_conf) || set(alloc_conf)) return "";
  return "expandable_segments:True";
}

void apply_default_cuda_allocator_settings() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string s =
        default_cuda_allocator_settings(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), std::getenv("PYTORCH_ALLOC_CONF"));
    if (!s.empty()) c10::CachingAllocator::setAllocatorSettings(s);
  });
}

}  // namespace monoflow::train
