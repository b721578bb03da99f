// bench_train_step: the training-step benchmark of docs/design.md ("Benchmark specifications:
// Training step"; tools/bench/step_bench.h), one row per MAS backend, precision and mode (eager
// or CUDA graph), as CSV on stdout (and --csv FILE) plus a table on stderr.
//   bench_train_step [--config configs/ljspeech.yaml] [--backends cpu,cuda,cuda-fast]
//                    [--precisions tf32,bf16] [--modes eager,graph] [--device cuda] [--csv out.csv]
//                    [--profile PREFIX [--profile-shapes]]
// --batch-size/--steps/--warmup exist for smoke tests on a CPU; results with them changed
// are not the benchmark and are flagged as such.
// Started by scripts/launch.sh N (torchrun's variables), it is the two-GPU benchmark: one
// process per GPU, each on its own batches, gradients averaged; rank 0 prints.
//   scripts/launch.sh 2 bench_train_step --backends cuda-fast --precisions tf32 --modes graph
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "align/mas.h"
#include "cli_main.h"
#include "common/synthetic_batch.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "train/distributed/distributed.h"
#include "bench/step_bench.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace monoflow;
  CLI::App app{"Training-step benchmark (docs/design.md): step ms, MAS ms, peak memory, samples/s."};
  std::string config_path = "configs/ljspeech.yaml", backends_arg, precisions_arg, modes_arg, device_arg = "auto",
              csv_path, profile_prefix;
  int batch_size = 32, steps = 30, warmup = 5;
  bool profile_shapes = false;
  std::vector<std::string> overrides;
  app.add_option("--config", config_path, "config whose model section is benchmarked");
  app.add_option("--set", overrides, "config override key=value (not the benchmark when model keys change)");
  app.add_option("--backends", backends_arg, "comma-separated MAS backends")->default_str("all available");
  app.add_option("--precisions", precisions_arg, "comma-separated: tf32, fp32, bf16")
      ->default_str("tf32,bf16 on a GPU, fp32 on the CPU");
  app.add_option("--device", device_arg, "auto, cpu, cuda or cuda:N");
  app.add_option("--modes", modes_arg, "comma-separated: eager, eager-padded (eager on the graphs' padded shapes, for profiles), graph, "
                 "graph-fixed (graph without measured bucket lengths)")
      ->default_str("eager,graph on a GPU, eager on the CPU");
  app.add_option("--csv", csv_path, "also write the CSV here");
  app.add_option("--profile", profile_prefix,
                 "after each row's timed steps, profile 3 more with Kineto into PREFIX_<backend>_<precision>_<mode>.json "
                 "(with several ranks, each rank's into ..._rank<r>.json)");
  app.add_flag("--profile-shapes", profile_shapes,
               "with --profile on a GPU, also record every op's input sizes (adds host time to eager steps)");
  app.add_option("--batch-size", batch_size, "batch size (spec: 32)");
  app.add_option("--steps", steps, "timed steps (spec: 30)");
  app.add_option("--warmup", warmup, "warm-up steps (spec: 5)");
  return cli_main(app, argc, argv, CliStyle("bench_train_step"), [&] {
    train::StepBenchOptions o;
    o.profile_shapes = profile_shapes;
    train::BenchSetup& setup = o.setup;
    setup.config = train::load_config(config_path, overrides);
    setup.device = train::resolve_device(device_arg, "--device");
    const train::DistributedOptions dist_options = train::distributed_options_from_env();
    if (dist_options.world_size > 1 && setup.device.is_cuda()) {
      setup.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist_options.local_rank));
    }
    train::Distributed dist(dist_options, setup.device);
    if (dist.world_size() > 1) o.distributed = &dist;
    const bool main_rank = dist.is_main();
    o.batch_size = batch_size;
    setup.timed = steps;
    setup.warmup = warmup;
    const bool spec = batch_size == 32 && steps == 30 && warmup == 5 && overrides.empty() &&
                      config_path.size() >= 13 && config_path.compare(config_path.size() - 13, 13, "ljspeech.yaml") == 0;
    std::vector<align::Backend> backends;
    if (backends_arg.empty()) {
      backends = train::available_backends(setup.device);
    } else {
      for (const auto& name : split(backends_arg)) backends.push_back(align::parse_backend(name));
    }
    std::vector<std::string> precisions =
        precisions_arg.empty() ? (setup.device.is_cuda() ? std::vector<std::string>{"tf32", "bf16"}
                                                         : std::vector<std::string>{"fp32"})
                               : split(precisions_arg);
    const std::vector<std::string> modes =
        modes_arg.empty() ? (setup.device.is_cuda() ? std::vector<std::string>{"eager", "graph"}
                                                    : std::vector<std::string>{"eager"})
                          : split(modes_arg);
    // Each rank its own batches (rank 0's are the single-process benchmark's).
    const auto batches = train::synthetic_batches(o.num_batches, o.batch_size, setup.vocab, o.n_mels,
                                                  synthetic_rank_seed(setup.seed, dist.rank()));
    std::ostringstream csv;
    csv << train::csv_header() << "\n";
    if (main_rank) {
      std::fprintf(stderr, "bench_train_step on %s%s, model of %s%s\n", setup.device.str().c_str(),
                   dist.world_size() > 1 ? (" and " + std::to_string(dist.world_size() - 1) + " more rank(s)").c_str() : "",
                   config_path.c_str(), spec ? "" : " (NOT the docs/design.md spec: batch/steps/warm-up/model changed)");
      std::cout << train::csv_header() << std::endl;
      std::fprintf(stderr, "%-10s %-5s %-5s %9s %9s %9s %10s %10s\n", "backend", "prec", "mode", "step ms", "p90 ms",
                   "MAS ms", "peak MiB", "samples/s");
    }
    for (const auto backend : backends) {
      for (const auto& precision : precisions) {
        for (const auto& mode : modes) {
          if (!train::is_eager_mode(mode) && backend == align::Backend::kCpu) continue;  // the cpu backend syncs
          o.profile_path = profile_prefix.empty() ? std::string()
                                                  : profile_prefix + "_" + align::backend_name(backend) + "_" +
                                                        precision + "_" + mode +
                                                        (dist.world_size() > 1 ? "_rank" + std::to_string(dist.rank()) : "") +
                                                        ".json";
          const auto row = train::bench_train_step(o, backend, precision, mode, batches);
          if (!main_rank) continue;
          std::cout << train::csv_row(row) << std::endl;
          csv << train::csv_row(row) << "\n";
          std::fprintf(stderr, "%-10s %-5s %-5s %9.1f %9.1f %9.2f %10.0f %10.1f%s\n", row.backend.c_str(),
                       row.precision.c_str(), row.mode.c_str(), row.step_ms, row.step_ms_p90, row.mas_ms,
                       row.peak_memory_mib, row.samples_per_s, row.nonfinite_steps ? "  (non-finite losses!)" : "");
        }
      }
    }
    if (!csv_path.empty() && main_rank) {
      std::ofstream(csv_path) << csv.str();
    }
    return 0;
  });
}
