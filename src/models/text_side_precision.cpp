#include "models/text_side_precision.h"

#include <ATen/autocast_mode.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>

namespace monoflow::models {
namespace {

// The environment's choice, if it made one.
std::optional<bool> from_environment() {
  const char* value = std::getenv("MONOFLOW_TEXT_SIDE_AUTOCAST");
  const std::string text = value ? value : "";
  if (text == "1" || text == "true" || text == "on") return true;
  if (text == "0" || text == "false" || text == "off") return false;
  return std::nullopt;
}

std::atomic<bool>& setting() {
  static std::atomic<bool> on = from_environment().value_or(kTextSideAutocastByDefault);
  return on;
}

}  // namespace

void set_text_side_autocast(bool on) { setting() = on; }
bool text_side_autocast() { return setting().load(); }
bool text_side_autocast_set_by_environment() {
  static const bool set = from_environment().has_value();
  return set;
}

torch::ScalarType text_side_dtype(const torch::Tensor& like, torch::ScalarType otherwise) {
  if (!like.is_cuda() || !text_side_autocast() || !at::autocast::is_autocast_enabled(at::kCUDA)) return otherwise;
  // bf16 only: fp16 would need loss scaling, and the trainer's autocast is bf16.
  const auto dtype = at::autocast::get_autocast_dtype(at::kCUDA);
  return dtype == torch::kBFloat16 ? dtype : otherwise;
}

}  // namespace monoflow::models
