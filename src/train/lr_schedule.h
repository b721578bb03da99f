// Learning-rate schedule of the official Glow-TTS optimizer wrapper (commons.Adam):
//   noam:     lr = learning_rate * hidden^-0.5 * min(step^-0.5, step * warmup^-1.5)
//   constant: lr = learning_rate
// `step` counts optimizer updates from 1: update k uses lr(k), as the original does.
#pragma once

#include <cstdint>
#include <string>

namespace monoflow::train {

class LrSchedule {
 public:
  // kind: "noam" | "constant" (UserError otherwise, naming the key train.scheduler).
  LrSchedule(std::string kind, double learning_rate, int hidden_channels, int warmup_steps);

  double lr(int64_t step) const;
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  double learning_rate_;
  int hidden_channels_;
  int warmup_steps_;
};

}  // namespace monoflow::train
