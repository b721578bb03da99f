#include "train/cudnn_search.h"

#include "common/error.h"

namespace monoflow::train {

CudnnSearch parse_cudnn_search(const std::string& name) {
  if (name == "auto") return CudnnSearch::kAuto;
  if (name == "always") return CudnnSearch::kAlways;
  if (name == "never") return CudnnSearch::kNever;
  throw UserError("cudnn_search: '" + name + "' is not one of auto, always, never");
}

bool SearchSchedule::search_now(double replayed_ms) const {
  switch (mode_) {
    case CudnnSearch::kAlways:
      return true;
    case CudnnSearch::kNever:
      return false;
    case CudnnSearch::kAuto:
      break;
  }
  return last_cost_ms_ < 0 || replayed_ms >= last_cost_ms_;
}

}  // namespace monoflow::train
