#include "infer/align_export/ensemble.h"

#include "common/error.h"

namespace monoflow::train {

torch::Tensor median_durations(const std::vector<torch::Tensor>& durations) {
  if (durations.empty()) throw UserError("median_durations: no model's durations");
  for (const auto& d : durations) {
    if (d.dim() != 2 || d.sizes() != durations.front().sizes()) {
      throw UserError("median_durations: every model's durations must be [B, T] of one shape");
    }
  }
  if (durations.size() == 1) return durations.front().to(torch::kInt64);
  // Boundaries are cumulative sums; an order statistic of non-decreasing sequences is non-decreasing.
  const torch::Tensor ends = torch::stack(durations).to(torch::kInt64).cumsum(2);  // [M, B, T]
  const torch::Tensor median = std::get<0>(ends.median(0));                       // lower median
  return torch::diff(median, 1, 1, torch::zeros({median.size(0), 1}, median.options()));
}

}  // namespace monoflow::train
