#include "align/mas_compare.h"

#include <chrono>

#include "common/error.h"

namespace monoflow::align {

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::pair<torch::Tensor, double> timed_durations(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                                                 const torch::Tensor& mel_lengths, align::Backend backend,
                                                 float neg_inf, bool keep_input) {
  torch::NoGradGuard no_grad;
  align::MasOptions o;
  o.backend = backend;
  o.neg_inf = neg_inf;
  o.keep_input = keep_input;
  o.want_path = true;  // as in the training step
  o.want_durations = true;
  synchronize(logp.device());
  const auto start = std::chrono::steady_clock::now();
  auto result = align::maximum_path(logp, text_lengths, mel_lengths, o);
  synchronize(logp.device());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {result.durations, ms};
}

std::vector<BackendTiming> compare_backends(const StepAlignment& step, const std::vector<align::Backend>& backends,
                                            float neg_inf) {
  std::vector<BackendTiming> timings;
  const torch::Tensor reference = step.durations.to(torch::kCPU, torch::kInt64);
  const torch::Tensor lengths = step.text_lengths.to(torch::kCPU, torch::kInt64);
  for (const auto backend : backends) {
    auto [durations, ms] =
        timed_durations(step.logp, step.text_lengths, step.mel_lengths, backend, neg_inf, /*keep_input=*/true);
    timings.push_back({backend, ms});
    const torch::Tensor got = durations.to(torch::kCPU, torch::kInt64);
    const torch::Tensor differs = got.ne(reference);
    if (!differs.any().item<bool>()) continue;
    // First differing (utterance, token); its start frame is the reference's cumulative sum.
    const torch::Tensor where = differs.nonzero();
    const int64_t b = where[0][0].item<int64_t>(), t = where[0][1].item<int64_t>();
    const int64_t frame = t == 0 ? 0 : reference[b].slice(0, 0, t).sum().item<int64_t>();
    const std::string id = b < static_cast<int64_t>(step.ids.size()) ? " '" + step.ids[b] + "'" : "";
    throw UserError("--compare-align: MAS backend " + align::backend_name(backend) +
                    " disagrees with the training step's " + align::backend_name(step.backend) + " at " + step.label +
                    ", utterance " + std::to_string(b) + id + " (text length " +
                    std::to_string(lengths[b].item<int64_t>()) + "), token " + std::to_string(t) +
                    " starting at frame " + std::to_string(frame) + ": duration " +
                    std::to_string(got[b][t].item<int64_t>()) + " vs " +
                    std::to_string(reference[b][t].item<int64_t>()) +
                    ". This is a bug in that backend; report it with this message");
  }
  return timings;
}

}  // namespace monoflow::align
