#include "models/autocast.h"

#include <ATen/autocast_mode.h>

namespace monoflow::models {

Bf16Autocast::Bf16Autocast(bool enabled, const torch::Device& device) {
  if (!enabled || !device.is_cuda()) return;
  active_ = true;
  was_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
  previous_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::increment_nesting();
}

Bf16Autocast::~Bf16Autocast() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
  at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
}

}  // namespace monoflow::models
