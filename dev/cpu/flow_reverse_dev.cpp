// Micro-benchmark of the decoder flows' reverse transforms on the CPU (src/models/flow_reverse_cpu.h)
// against their composite references (flow_fused.h), at the decoder's shape in inference
// (batch 1, 160 channels = 80 mels x 2 squeezed, 900 squeezed frames for 1,800 mel frames, no
// padding): ActNorm's reverse, InvConvNear's mixing by a 4 x 4 weight and the coupling's reverse
// map. Checks each against its reference first, then prints median milliseconds of each and of
// one flow's three, and that times the decoder's flow count.
//   flow_reverse_dev [--frames 900] [--channels 160] [--flows 12] [--reps 200]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/host_memory.h"
#include "median_ms.h"
#include "relative_diff.h"
#include "models/flow_fused.h"
#include "models/flow_reverse_cpu.h"

int main(int argc, char** argv) {
  int64_t frames = 900, channels = 160, flows = 12;
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--frames" && i + 1 < argc) frames = std::stoll(argv[++i]);
    else if (a == "--channels" && i + 1 < argc) channels = std::stoll(argv[++i]);
    else if (a == "--flows" && i + 1 < argc) flows = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
  }
  using namespace monoflow::models;
  monoflow::keep_freed_host_memory();  // as synthesize and bench_inference
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const auto x = torch::randn({1, channels, frames});
  const auto mask = torch::ones({1, 1, frames});
  const auto logs = torch::randn({1, channels, 1}) * 0.3, bias = torch::randn({1, channels, 1});
  const auto w = std::get<0>(torch::linalg_qr(torch::randn({4, 4})));
  const auto m_and_logs = torch::randn({1, channels, frames}) * 0.5;

  std::printf("max |difference| / max |reference|: actnorm %.1e, invconv %.1e, coupling %.1e\n",
              relative_diff(cpu::actnorm_reverse(x, logs, bias, mask), actnorm_reverse_reference(x, logs, bias, mask)),
              relative_diff(cpu::invconv_mix(x, w, mask), invconv_mix_reference(x, w, mask)),
              relative_diff(cpu::coupling_reverse(x, m_and_logs, mask), coupling_reverse_reference(x, m_and_logs, mask)));
  struct Row {
    const char* name;
    std::function<void()> reference, fused;
  };
  const std::vector<Row> rows = {
      {"actnorm reverse", [&] { actnorm_reverse_reference(x, logs, bias, mask); },
       [&] { cpu::actnorm_reverse(x, logs, bias, mask); }},
      {"invconv mix", [&] { invconv_mix_reference(x, w, mask); }, [&] { cpu::invconv_mix(x, w, mask); }},
      {"coupling reverse", [&] { coupling_reverse_reference(x, m_and_logs, mask); },
       [&] { cpu::coupling_reverse(x, m_and_logs, mask); }},
  };
  double reference_sum = 0, fused_sum = 0;
  std::printf("%lld channels, %lld frames, %d threads: median ms (reference / one pass)\n",
              static_cast<long long>(channels), static_cast<long long>(frames), torch::get_num_threads());
  for (const auto& row : rows) {
    const double r = median_ms(reps, row.reference, 5), f = median_ms(reps, row.fused, 5);
    reference_sum += r;
    fused_sum += f;
    std::printf("  %-17s %.4f / %.4f  (%.1fx)\n", row.name, r, f, r / f);
  }
  std::printf("  a flow's three     %.4f / %.4f; x %lld flows: %.2f / %.2f ms\n", reference_sum, fused_sum,
              static_cast<long long>(flows), reference_sum * flows, fused_sum * flows);
  return 0;
}
