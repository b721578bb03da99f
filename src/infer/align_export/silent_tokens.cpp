#include "infer/align_export/silent_tokens.h"

#include <limits>
#include <string>

#include "common/error.h"

namespace monoflow::train {

torch::Tensor silent_token_durations(const torch::Tensor& logp_in, const std::vector<bool>& skippable) {
  TORCH_CHECK(logp_in.dim() == 2 && logp_in.device().is_cpu(), "silent_token_durations: logp must be [tokens, frames] on the CPU");
  const torch::Tensor logp = logp_in.to(torch::kFloat64).contiguous();
  const int64_t n = logp.size(0), frames = logp.size(1);
  TORCH_CHECK(static_cast<int64_t>(skippable.size()) == n, "silent_token_durations: one skippable flag per token");
  int64_t needed = 0;
  for (const bool s : skippable) needed += s ? 0 : 1;
  if (needed > frames || n == 0) {
    throw UserError(std::to_string(needed) + " spoken token(s) cannot each take a frame of " + std::to_string(frames));
  }
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  const auto lp = logp.accessor<double, 2>();
  // value[i]: the best path's score with the current frame on token i; from[t * n + i]: the token
  // the previous frame was on.
  std::vector<double> value(static_cast<size_t>(n), kNone), next(static_cast<size_t>(n));
  std::vector<int32_t> from(static_cast<size_t>(n * frames), -1);
  // Frame 0: on any token that only skippable tokens precede.
  for (int64_t i = 0; i < n; ++i) {
    value[static_cast<size_t>(i)] = lp[i][0];
    if (!skippable[static_cast<size_t>(i)]) break;
  }
  for (int64_t t = 1; t < frames; ++t) {
    // reach, best_from: the best previous-frame token strictly before i from which i is reached
    // over skippable tokens only.
    double reach = kNone;
    int32_t best_from = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0) {
        const double prev = value[static_cast<size_t>(i - 1)];
        if (!skippable[static_cast<size_t>(i - 1)]) {
          reach = prev;
          best_from = static_cast<int32_t>(i - 1);
        } else if (prev >= reach) {  // ties: the later token, the shorter skip
          reach = prev;
          best_from = static_cast<int32_t>(i - 1);
        }
      }
      const double stay = value[static_cast<size_t>(i)];
      const bool stays = stay >= reach;
      const double best = stays ? stay : reach;
      next[static_cast<size_t>(i)] = best == kNone ? kNone : best + lp[i][t];
      from[static_cast<size_t>(t * n + i)] = stays ? static_cast<int32_t>(i) : best_from;
    }
    value.swap(next);
  }
  // The last frame: on any token that only skippable tokens follow.
  int64_t end = -1;
  double best = kNone;
  for (int64_t i = n - 1; i >= 0; --i) {
    if (value[static_cast<size_t>(i)] > best) {
      best = value[static_cast<size_t>(i)];
      end = i;
    }
    if (!skippable[static_cast<size_t>(i)]) break;
  }
  if (end < 0) throw UserError("no monotonic path through " + std::to_string(n) + " tokens and " + std::to_string(frames) + " frames");
  torch::Tensor durations = torch::zeros({n}, torch::kInt64);
  auto d = durations.accessor<int64_t, 1>();
  for (int64_t t = frames - 1, i = end; t >= 0; --t) {
    ++d[i];
    i = from[static_cast<size_t>(t * n + i)];
  }
  return durations;
}

}  // namespace monoflow::train
