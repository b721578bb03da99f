#include "models/text_side_precision.h"

#include <ATen/autocast_mode.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>

namespace monoflow::models {
namespace {

// The environment's choice at start-up, if it made one: read once, for the setting's first
// value and for text_side_autocast_set_by_environment alike.
const std::optional<bool>& environment_choice() {
  static const std::optional<bool> choice = []() -> std::optional<bool> {
    const char* value = std::getenv("MONOFLOW_TEXT_SIDE_AUTOCAST");
    const std::string text = value ? value : "";
    if (text == "1" || text == "true" || text == "on") return true;
    if (text == "0" || text == "false" || text == "off") return false;
    return std::nullopt;
  }();
  return choice;
}

std::atomic<bool>& setting() {
  static std::atomic<bool> on = environment_choice().value_or(kTextSideAutocastByDefault);
  return on;
}

}  // namespace

void set_text_side_autocast(bool on) { setting() = on; }
bool text_side_autocast() { return setting().load(); }
bool text_side_autocast_set_by_environment() { return environment_choice().has_value(); }

torch::ScalarType text_side_dtype(const torch::Tensor& like, torch::ScalarType otherwise) {
  if (!like.is_cuda() || !text_side_autocast() || !at::autocast::is_autocast_enabled(at::kCUDA)) return otherwise;
  // bf16 only: fp16 would need loss scaling, and the trainer's autocast is bf16.
  const auto dtype = at::autocast::get_autocast_dtype(at::kCUDA);
  return dtype == torch::kBFloat16 ? dtype : otherwise;
}

}  // namespace monoflow::models
