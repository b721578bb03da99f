#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace monoflow::train {

LrSchedule::LrSchedule(std::string kind, double learning_rate, int hidden_channels,
                       int warmup_steps)
    : kind_(std::move(kind)),
      learning_rate_(learning_rate),
      hidden_channels_(hidden_channels),
      warmup_steps_(warmup_steps) {
  if (kind_ != "noam" && kind_ != "constant") {
    throw UserError("train.scheduler: unknown schedule '" + kind_ + "'; use noam or constant");
  }
  if (kind_ == "noam" && (hidden_channels_ <= 0 || warmup_steps_ <= 0)) {
    throw UserError("train.warmup_steps and model.hidden_channels must be positive for the noam "
                    "schedule (got " + std::to_string(warmup_steps_) + ", " +
                    std::to_string(hidden_channels_) + ")");
  }
}

double LrSchedule::lr(int64_t step) const {
  if (kind_ == "constant") return learning_rate_;
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double scale = std::pow(static_cast<double>(hidden_channels_), -0.5) *
                       std::min(std::pow(s, -0.5), s * std::pow(warmup_steps_, -1.5));
  return learning_rate_ * scale;
}

}  // namespace monoflow::train
