// Micro-benchmark of the CPU Winograd convolution (src/models/winograd_conv1d.h) at the WN
// in_layer's shape against torch's conv1d (oneDNN) and gated unit, and the parts of the fast
// path: the batched product alone, and the transforms (the rest); then the whole WN layer
// step (gate and res_skip) as separate products and as winograd_wn_layer. Checks results first.
//   winograd_conv1d_dev [--frames 900] [--channels 192] [--reps 50]
//   winograd_conv1d_dev --kernel3 [--frames 100]: the text encoder's kernel-3 FFN convolutions
//   on the same path (weight zero-padded to 5 taps) against torch's conv1d.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/host_memory.h"
#include "median_ms.h"
#include "models/winograd_conv1d.h"
#include "models/wn_fused.h"

int main(int argc, char** argv) {
  int64_t frames = 900, channels = 192;
  int reps = 50;
  bool kernel3 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kernel3") kernel3 = true;
    else if (a == "--frames" && i + 1 < argc) frames = std::stoll(argv[++i]);
    else if (a == "--channels" && i + 1 < argc) channels = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
  }
  using namespace monoflow::models;
  monoflow::keep_freed_host_memory();  // as synthesize and bench_inference
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  if (kernel3) {
    // The text encoder's FFN convolutions (kernel 3) on the kernel-5 path: the weight
    // zero-padded to 5 taps with padding 2 is the same convolution.
    for (auto [ci, co] : {std::pair<int64_t, int64_t>{192, 768}, {768, 192}}) {
      auto x = torch::randn({1, ci, frames});
      auto w = torch::randn({co, ci, 3}) * 0.05;
      auto b = torch::randn({co});
      auto w5 = torch::constant_pad_nd(w, {1, 1});
      auto u = winograd_weight(w5);
      auto ref = torch::conv1d(x, w, b, 1, 1);
      auto got = winograd_conv1d(x, u, b);
      const double torch_ms = median_ms(reps, [&] { torch::conv1d(x, w, b, 1, 1); });
      const double wino_ms = median_ms(reps, [&] { winograd_conv1d(x, u, b); });
      std::printf("kernel 3, %lld -> %lld channels, %lld frames: torch %.3f ms, winograd %.3f ms, max |diff| %.2e of %.2f\n",
                  static_cast<long long>(ci), static_cast<long long>(co), static_cast<long long>(frames), torch_ms, wino_ms,
                  (got - ref).abs().max().item<double>(), ref.abs().max().item<double>());
    }
    return 0;
  }
  const auto x = torch::randn({1, channels, frames});
  const auto w = torch::randn({2 * channels, channels, 5}) / std::sqrt(5.0 * channels);
  const auto bias = torch::randn({2 * channels}) * 0.1;
  const auto u = winograd_weight(w);
  const auto ref = torch::conv1d(x.to(torch::kDouble), w.to(torch::kDouble), bias.to(torch::kDouble), 1, 2);
  const double scale = ref.abs().max().item<double>();
  const double err_torch = (torch::conv1d(x, w, bias, 1, 2).to(torch::kDouble) - ref).abs().max().item<double>();
  const double err_wino = (winograd_conv1d(x, u, bias).to(torch::kDouble) - ref).abs().max().item<double>();
  const double err_gate =
      (winograd_conv1d_gated(x, u, bias) - gated_activation_reference(torch::conv1d(x, w, bias, 1, 2)))
          .abs().max().item<double>();
  std::printf("shape [1, %lld, %lld], %lld -> %lld channels, kernel 5; threads %d; GEMM blocks in %s registers\n",
              (long long)channels, (long long)frames, (long long)channels, (long long)(2 * channels),
              torch::get_num_threads(), cpu_winograd_avx512_active() ? "16-lane (AVX-512F)" : "8-lane (AVX2)");
  std::printf("max |error| / max |y| against float64: torch %.2e, winograd %.2e; gated vs torch's %.2e\n",
              err_torch / scale, err_wino / scale, err_gate);
  const int64_t tiles = ((frames + 3) / 4 + 7) / 8 * 8;
  const auto v = torch::randn({8, channels, tiles});
  const double gflop = 2.0 * 2 * channels * channels * 5 * frames / 1e9;
  const double t_conv = median_ms(reps, [&] { torch::conv1d(x, w, bias, 1, 2); });
  const double t_conv_gate =
      median_ms(reps, [&] { gated_activation_reference(torch::conv1d(x, w, bias, 1, 2)); });
  const double t_wino = median_ms(reps, [&] { winograd_conv1d(x, u, bias); });
  const double t_wino_gate = median_ms(reps, [&] { winograd_conv1d_gated(x, u, bias); });
  const auto u_rows = torch::randn({8, 2 * channels, channels});
  const double t_bmm = median_ms(reps, [&] { torch::bmm(u_rows, v); });
  // The whole WN layer after the in_layer: gate, then res_skip [2C, C] added to the residual
  // and the skip, as two addmm_ (the path before winograd_wn_layer) and fused.
  const auto w_rs = torch::randn({2 * channels, channels}) / std::sqrt(1.0 * channels);
  const auto b_rs = torch::randn({2 * channels}) * 0.1;
  const auto rows = winograd_rows_weight(w_rs);
  auto residual = x.clone(), skip = torch::zeros_like(x);
  const auto separate = [&] {
    const auto acts = winograd_conv1d_gated(x, u, bias).select(0, 0);
    residual.select(0, 0).addmm_(w_rs.slice(0, 0, channels), acts);
    skip.select(0, 0).addmm_(w_rs.slice(0, channels, 2 * channels), acts);
    residual.add_(b_rs.slice(0, 0, channels).view({1, -1, 1}));
    skip.add_(b_rs.slice(0, channels, 2 * channels).view({1, -1, 1}));
  };
  const auto fused = [&] { winograd_wn_layer(x, u, bias, rows, b_rs, residual, skip); };
  {
    const auto r = torch::matmul(w_rs.to(torch::kDouble),
                                 gated_activation_reference(ref).select(0, 0)) + b_rs.to(torch::kDouble).view({-1, 1});
    residual = x.clone();
    skip.zero_();
    fused();
    const auto rw = x.select(0, 0).to(torch::kDouble) + r.slice(0, 0, channels);
    const auto sw = r.slice(0, channels, 2 * channels);
    std::printf("winograd_wn_layer: max |error| / max |y| against float64: residual %.2e, skip %.2e\n",
                (residual.select(0, 0) - rw).abs().max().item<double>() / rw.abs().max().item<double>(),
                (skip.select(0, 0) - sw).abs().max().item<double>() / sw.abs().max().item<double>());
  }
  const double t_separate = median_ms(reps, separate);
  const double t_fused = median_ms(reps, fused);
  std::printf("%-34s %8s %12s\n", "", "ms", "GFLOP/s(dir)");
  std::printf("%-34s %8.3f %12.1f\n", "torch conv1d (oneDNN)", t_conv, gflop / t_conv * 1e3);
  std::printf("%-34s %8.3f %12.1f\n", "torch conv1d + gate", t_conv_gate, gflop / t_conv_gate * 1e3);
  std::printf("%-34s %8.3f %12.1f\n", "winograd_conv1d", t_wino, gflop / t_wino * 1e3);
  std::printf("%-34s %8.3f %12.1f\n", "winograd_conv1d_gated", t_wino_gate, gflop / t_wino_gate * 1e3);
  std::printf("%-34s %8.3f %12.1f (actual GFLOP/s)\n", "  torch::bmm of the same product", t_bmm,
              2.0 * 8 * 2 * channels * channels * tiles / 1e9 / t_bmm * 1e3);
  const double gflop_layer = gflop + 2.0 * 2 * channels * channels * frames / 1e9;
  std::printf("%-34s %8.3f %12.1f\n", "gated + res_skip by addmm_", t_separate, gflop_layer / t_separate * 1e3);
  std::printf("%-34s %8.3f %12.1f\n", "winograd_wn_layer (fused)", t_fused, gflop_layer / t_fused * 1e3);
  if (cpu_winograd_avx512_active()) {
    // The rows above ran the GEMM blocks in 16-lane registers; the same with the AVX2 blocks.
    set_cpu_winograd_avx512(false);
    const double t_wino2 = median_ms(reps, [&] { winograd_conv1d(x, u, bias); });
    const double t_fused2 = median_ms(reps, fused);
    set_cpu_winograd_avx512(true);
    std::printf("%-34s %8.3f %12.1f\n", "winograd_conv1d, AVX2 blocks", t_wino2, gflop / t_wino2 * 1e3);
    std::printf("%-34s %8.3f %12.1f\n", "winograd_wn_layer, AVX2 blocks", t_fused2, gflop_layer / t_fused2 * 1e3);
  }
  return 0;
}
