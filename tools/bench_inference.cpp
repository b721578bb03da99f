// bench_inference: the inference benchmark of docs/design.md ("Benchmark specifications:
// Inference"; tools/bench/infer_bench.h): one 100-symbol sentence to a ~1,800-frame mel, per
// precision, as CSV on stdout (and --csv FILE) plus a table on stderr.
//   bench_inference [--config configs/ljspeech.yaml] [--precisions tf32,bf16] [--modes eager,graph,graph-text,graph-decoder]
//                   [--device cuda] [--csv out.csv] [--batch 16] [--profile trace.json]
// --batch N runs the sentence N times at once (synthesize --text-file's batches; frames/s counts
// all N).
// --symbols/--frames/--calls/--warmup exist for smoke tests on a CPU; results with them
// changed are not the benchmark and are flagged as such.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli_main.h"
#include "common/host_memory.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "bench/infer_bench.h"

int main(int argc, char** argv) {
  using namespace monoflow;
  CLI::App app{"Inference benchmark (docs/design.md): one sentence to mel, ms per call."};
  std::string config_path = "configs/ljspeech.yaml", device_arg = "auto", csv_path;
  std::vector<std::string> precisions, modes, overrides;
  train::InferBenchOptions o;
  app.add_option("--config", config_path, "config whose model section is benchmarked");
  app.add_option("--set", overrides, "config override key=value (not the benchmark when model keys change)");
  app.add_option("--precisions", precisions, "tf32, fp32, bf16")
      ->delimiter(',')
      ->default_str("tf32,bf16 on a GPU, fp32 on the CPU");
  app.add_option("--modes", modes, "eager, graph, graph-text, graph-decoder")
      ->delimiter(',')
      ->default_str("eager,graph on a GPU, eager on the CPU");
  app.add_option("--device", device_arg, "auto, cpu, cuda or cuda:N");
  app.add_option("--csv", csv_path, "also write the CSV here");
  app.add_option("--batch", o.batch, "utterances at once, all the same sentence")->check(CLI::PositiveNumber);
  app.add_option("--symbols", o.symbols, "input symbols (spec: 100)")->check(CLI::PositiveNumber);
  app.add_option("--frames", o.target_frames, "output frames the length scale aims at (spec: 1800)")
      ->check(CLI::PositiveNumber);
  app.add_option("--calls", o.setup.timed, "timed calls (spec: 20)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.setup.warmup, "warm-up calls (spec: 3)")->check(CLI::NonNegativeNumber);
  app.add_option("--profile", o.profile_path,
                 "after the timed calls, profile 3 more with Kineto into this Chrome trace "
                 "(scripts/profile_cpu_ops.py sums a CPU one by op)");
  return cli_main(app, argc, argv, CliStyle("bench_inference"), [&] {
    keep_freed_host_memory();  // as synthesize does (common/host_memory.h)
    o.setup.config = train::load_config(config_path, overrides);
    o.setup.device = train::resolve_device(device_arg, "--device");
    const torch::Device& device = o.setup.device;
    const bool spec = overrides.empty() && o.symbols == 100 && o.batch == 1 && o.target_frames == 1800 && o.setup.timed == 20 &&
                      o.setup.warmup == 3 && config_path.size() >= 13 &&
                      config_path.compare(config_path.size() - 13, 13, "ljspeech.yaml") == 0;
    if (precisions.empty()) {
      precisions = device.is_cuda() ? std::vector<std::string>{"tf32", "bf16"} : std::vector<std::string>{"fp32"};
    }
    if (modes.empty()) {
      modes = device.is_cuda() ? std::vector<std::string>{"eager", "graph"} : std::vector<std::string>{"eager"};
    }
    std::fprintf(stderr, "bench_inference on %s, model of %s%s\n", device.str().c_str(), config_path.c_str(),
                 spec ? "" : " (NOT the docs/design.md spec: symbols/frames/calls/model changed)");
    std::ostringstream csv;
    csv << train::infer_csv_header() << "\n";
    std::cout << train::infer_csv_header() << std::endl;
    std::fprintf(stderr, "%-5s %-13s %5s %7s %7s %8s %9s %9s %10s\n", "prec", "mode", "batch", "symbols", "frames",
                 "l.scale", "ms", "p90 ms", "frames/s");
    for (const auto& precision : precisions) {
      for (const auto& mode : modes) {
        const auto row = train::bench_inference(o, precision, mode);
        std::cout << train::infer_csv_row(row) << std::endl;
        csv << train::infer_csv_row(row) << "\n";
        std::fprintf(stderr, "%-5s %-13s %5d %7d %7d %8.3f %9.2f %9.2f %10.0f\n", row.precision.c_str(),
                     row.mode.c_str(), row.batch, row.symbols, row.frames, row.length_scale, row.ms, row.ms_p90,
                     row.frames_per_s);
      }
    }
    if (!csv_path.empty()) std::ofstream(csv_path) << csv.str();
    return 0;
  });
}
