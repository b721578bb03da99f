// Micro-benchmark of LayerNorm over channels on the CPU (src/models/channel_norm_cpu.h) against the
// composite it replaced (ATen's layer_norm over the transposed channels, the output made
// contiguous, the residual sum and the mask as ops of their own), at the aligner's text-encoder
// shape (configs/aligner.yaml: batch 8, 48 channels; ~160 tokens with blanks). Checks the values
// and gradients first, then prints median milliseconds of a forward and of a forward with its
// backward, and that times the norms a step runs.
//   channel_norm_dev [--batch 8] [--channels 48] [--frames 160] [--norms 9] [--reps 200]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "median_ms.h"
#include "relative_diff.h"
#include "models/channel_norm_cpu.h"

namespace {

// mask * norm(x + r), as models/modules.cpp ran it before the one-pass kernel.
torch::Tensor composite(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& mask,
                        const torch::Tensor& gamma, const torch::Tensor& beta) {
  const auto input = x + r;
  const auto y = at::layer_norm(input.transpose(1, -1), {x.size(1)}, gamma, beta, 1e-4).transpose(1, -1).contiguous();
  return y * mask;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 8, channels = 48, frames = 160, norms = 9;
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) batch = std::stoll(argv[++i]);
    else if (a == "--channels" && i + 1 < argc) channels = std::stoll(argv[++i]);
    else if (a == "--frames" && i + 1 < argc) frames = std::stoll(argv[++i]);
    else if (a == "--norms" && i + 1 < argc) norms = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
  }
  using monoflow::models::cpu::channel_layer_norm_cpu;
  torch::manual_seed(0);
  const auto x = torch::randn({batch, channels, frames}).requires_grad_(true);
  const auto r = torch::randn({batch, channels, frames}).requires_grad_(true);
  const auto g = torch::randn({batch, channels, frames});
  // lengths from the full length down to half of it
  const auto lengths = frames - torch::arange(batch) * (frames / 2) / std::max<int64_t>(batch - 1, 1);
  const auto mask = (torch::arange(frames).view({1, 1, frames}) < lengths.view({batch, 1, 1})).to(torch::kFloat);
  const auto gamma = (torch::rand({channels}) + 0.5).requires_grad_(true);
  const auto beta = (torch::rand({channels}) - 0.5).requires_grad_(true);
  const std::vector<torch::Tensor> inputs{x, r, gamma, beta};

  const auto y = channel_layer_norm_cpu(x, gamma, beta, 1e-4, r, mask), y_ref = composite(x, r, mask, gamma, beta);
  const auto grads = torch::autograd::grad({y}, inputs, {g}), grads_ref = torch::autograd::grad({y_ref}, inputs, {g});
  std::printf("max |difference| / max |reference|: y %.1e, x %.1e, r %.1e, gamma %.1e, beta %.1e\n",
              relative_diff(y, y_ref), relative_diff(grads[0], grads_ref[0]), relative_diff(grads[1], grads_ref[1]),
              relative_diff(grads[2], grads_ref[2]), relative_diff(grads[3], grads_ref[3]));

  const std::function<torch::Tensor()> reference = [&] { return composite(x, r, mask, gamma, beta); };
  const std::function<torch::Tensor()> fused = [&] { return channel_layer_norm_cpu(x, gamma, beta, 1e-4, r, mask); };
  auto forward_only = [&](const std::function<torch::Tensor()>& f) {
    return median_ms(reps, [&] {
      torch::NoGradGuard no_grad;
      f();
    });
  };
  auto both_ways = [&](const std::function<torch::Tensor()>& f) {
    return median_ms(reps, [&] { torch::autograd::grad({f()}, inputs, {g}); });
  };
  const double fr = forward_only(reference), ff = forward_only(fused);
  const double br = both_ways(reference), bf = both_ways(fused);
  std::printf("[%lld, %lld, %lld], %d threads: median ms (composite / one pass)\n", static_cast<long long>(batch),
              static_cast<long long>(channels), static_cast<long long>(frames), torch::get_num_threads());
  std::printf("  forward             %.4f / %.4f  (%.1fx)\n", fr, ff, fr / ff);
  std::printf("  forward + backward  %.4f / %.4f  (%.1fx); x %lld norms: %.2f / %.2f ms\n", br, bf, br / bf,
              static_cast<long long>(norms), br * norms, bf * norms);
  return 0;
}
