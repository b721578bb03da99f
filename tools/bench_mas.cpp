// bench_mas: the MAS grid of docs/design.md ("Benchmark specifications: MAS grid"; float32
// logp ~ N(0,1) on the GPU, S = 4T, B in {16, 32}, T in {128, ..., 2048}, full lengths, plus
// one random-lengths run), a training-batch point (the training-step benchmark's first batch,
// common/synthetic_batch.h), and the cuda-fast kernels forced one by one (align/mas_tuning.h;
// the versions production no longer runs are timed by dev/cuda/mas_fast.cu). Median ms per
// backend; the cpu backend is timed with its host/device copies.
// Prints a table and CSV (backend,B,T,S,ms); variants and special runs carry a [tag] in the
// backend column, its parts joined by "+" so that the CSV keeps five fields.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "align/mas.h"
#include "align/mas_tuning.h"
#include "cli_main.h"
#include "common/synthetic_batch.h"

namespace {

using monoflow::align::Backend;
using monoflow::align::FastMasTuning;
using monoflow::align::MasOptions;

struct Args {
  std::vector<std::string> backends = {"cpu", "cuda", "cuda-fast"};
  std::string csv;
  int repeats = 10;
  int cpu_max_text = 2048;  // the cpu backend runs T <= this
  bool quick = false;       // B=16, T <= 512 only
  std::vector<int64_t> point;  // --point B,T,S: that shape alone (e.g. under a profiler)
};

// The command line. Lists arrive as comma-separated text and are checked in parse_lists.
void add_options(CLI::App& app, Args& a, std::string& backends, std::string& point) {
  app.add_option("--backends", backends, "comma-separated MAS backends")->default_str("cpu,cuda,cuda-fast");
  app.add_option("--csv", a.csv, "also write the CSV here");
  app.add_option("--repeats", a.repeats, "timed runs per point (at least 1)");
  app.add_option("--cpu-max-text", a.cpu_max_text, "the cpu backend runs T <= this");
  app.add_option("--point", point, "B,T,S: that shape alone (e.g. under a profiler)");
  app.add_flag("--quick", a.quick, "B=16, T <= 512 only");
}

void parse_lists(Args& a, const std::string& backends, const std::string& point) {
  a.repeats = std::max(1, a.repeats);
  if (!backends.empty()) {
    a.backends.clear();
    std::stringstream list(backends);
    for (std::string b; std::getline(list, b, ',');) {
      monoflow::align::parse_backend(b);
      a.backends.push_back(b);
    }
  }
  if (!point.empty()) {
    std::stringstream list(point);
    try {
      for (std::string n; std::getline(list, n, ',');) a.point.push_back(std::stoll(n));
    } catch (const std::logic_error&) {
      a.point.clear();
    }
    if (a.point.size() != 3) throw monoflow::UserError("--point takes B,T,S");
  }
}

struct Input {
  torch::Tensor logp, text_lengths, mel_lengths;  // logp on the GPU, lengths on the GPU
};

Input full_input(int64_t batch, int64_t text, int64_t mel) {
  Input in;
  in.logp = torch::randn({batch, text, mel}, torch::dtype(torch::kFloat32).device(torch::kCUDA));
  in.text_lengths = torch::full({batch}, text, torch::dtype(torch::kInt64).device(torch::kCUDA));
  in.mel_lengths = torch::full({batch}, mel, torch::dtype(torch::kInt64).device(torch::kCUDA));
  return in;
}

// Random lengths: text uniform in [T/2, T], mel = max(text, round(S * U(0.5, 1))).
Input random_length_input(int64_t batch, int64_t text, int64_t mel) {
  Input in = full_input(batch, text, mel);
  torch::Tensor t = torch::randint(text / 2, text + 1, {batch}, torch::kInt64);
  torch::Tensor s = torch::round((torch::rand({batch}, torch::kFloat64) * 0.5 + 0.5) * mel).to(torch::kInt64);
  s = torch::maximum(s, t).clamp_max(mel);
  in.text_lengths = t.cuda();
  in.mel_lengths = s.cuda();
  return in;
}

// The training-step benchmark's first batch (common/synthetic_batch.h, seed 1234): its
// LJSpeech-shaped lengths, logp ~ N(0, 1) as elsewhere.
Input training_input(int batch) {
  const monoflow::SyntheticLengths l = monoflow::SyntheticBatches(monoflow::kSyntheticSeed).next_lengths(batch);
  Input in = full_input(batch, l.max_text(), l.max_mel());
  in.text_lengths = torch::tensor(l.text, torch::kInt64).cuda();
  in.mel_lengths = torch::tensor(l.mel, torch::kInt64).cuda();
  return in;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median wall milliseconds of maximum_path, GPU synchronised around each call. `cuda`
// works in place, so every call gets a fresh copy of logp, made outside the timing.
double time_backend(const Input& in, MasOptions options, int repeats, int warmup,
                    torch::Tensor* durations, const FastMasTuning& tuning = {}) {
  torch::Tensor work = in.logp.clone();
  std::vector<double> ms;
  for (int i = 0; i < warmup + repeats; ++i) {
    work.copy_(in.logp);
    torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    auto result = monoflow::align::maximum_path(work, in.text_lengths, in.mel_lengths, options, tuning);
    torch::cuda::synchronize();
    const auto stop = std::chrono::steady_clock::now();
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    if (durations) *durations = result.durations;
  }
  return median(ms);
}

struct Row {
  std::string backend;
  int64_t batch, text, mel;
  double ms;
  std::string note;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The MAS grid benchmark (docs/design.md, \"Benchmark specifications: MAS grid\")."};
  Args parsed;
  std::string backends_arg, point_arg;
  add_options(app, parsed, backends_arg, point_arg);
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("bench_mas").user_label("").usage_exit_code(1),
                            [&] {
    parse_lists(parsed, backends_arg, point_arg);
    const Args& args = parsed;
    if (!torch::cuda::is_available()) {
      std::fprintf(stderr, "bench_mas: no CUDA device; the grid is specified on the GPU\n");
      return 1;
    }
    torch::manual_seed(1234);
    std::vector<Row> rows;

    auto bench_point = [&](const std::string& tag, const Input& in, int64_t batch, int64_t text,
                           int64_t mel) {
      torch::Tensor reference;  // durations of the first backend run, to check agreement
      for (const std::string& name : args.backends) {
        const Backend backend = monoflow::align::parse_backend(name);
        if (!monoflow::align::backend_available(backend)) continue;
        const bool is_cpu = backend == Backend::kCpu;
        if (is_cpu && text > args.cpu_max_text) continue;
        MasOptions o;
        o.backend = backend;
        // The cpu backend costs seconds at the largest points: fewer repeats there.
        const int64_t cells = batch * text * mel;
        const int repeats = is_cpu ? (cells > (1LL << 28) ? 1 : 3) : args.repeats;
        const int warmup = is_cpu ? (cells > (1LL << 28) ? 0 : 1) : 2;
        torch::Tensor durations;
        const double ms = time_backend(in, o, repeats, warmup, &durations);
        std::string note;
        if (!reference.defined()) {
          reference = durations;
        } else {
          note = torch::equal(durations, reference) ? "same" : "DIFFERENT";
        }
        rows.push_back({tag.empty() ? name : name + "[" + tag + "]", batch, text, mel, ms, note});
        std::fprintf(stderr, "  %-32s B=%-3lld T=%-5lld S=%-6lld %10.3f ms %s\n",
                     rows.back().backend.c_str(), (long long)batch, (long long)text,
                     (long long)mel, ms, note.c_str());
        if (backend == Backend::kCudaFast) {  // kernels and rows per lane (mas_tuning.h), durations only
          const std::string prefix = name + "[" + (tag.empty() ? "" : tag + "+");
          struct Variant {
            const char* label;
            FastMasTuning tuning;
          };
          for (const Variant& v : {Variant{"K4", {0, 4}}, Variant{"K8", {0, 8}}, Variant{"v3-tagged", {3, 0}},
                                   Variant{"v3-tagged+K8", {3, 8}}, Variant{"v4-fused+K2", {4, 2}},
                                   Variant{"v4-fused+K4", {4, 4}}}) {
            try {
              const double vms = time_backend(in, o, repeats, warmup, &durations, v.tuning);
              rows.push_back({prefix + v.label + "]", batch, text, mel, vms,
                              torch::equal(durations, reference) ? "same" : "DIFFERENT"});
            } catch (const monoflow::UserError& e) {
              if (std::string(e.what()).find("does not fit") != std::string::npos) continue;  // v4: too long
              rows.push_back({prefix + v.label + "]", batch, text, mel, -1, "ERROR"});
              std::fprintf(stderr, "%s: %s\n", rows.back().backend.c_str(), e.what());
            } catch (const std::exception& e) {
              rows.push_back({prefix + v.label + "]", batch, text, mel, -1, "ERROR"});
              std::fprintf(stderr, "%s: %s\n", rows.back().backend.c_str(), e.what());
            }
          }
          o.want_path = false;
          const double dms = time_backend(in, o, repeats, warmup, &durations);
          rows.push_back({prefix + "durations-only]", batch,
                          text, mel, dms, torch::equal(durations, reference) ? "same" : "DIFFERENT"});
        }
      }
    };

    if (!args.point.empty()) {
      const Input in = full_input(args.point[0], args.point[1], args.point[2]);
      bench_point("", in, args.point[0], args.point[1], args.point[2]);
      for (const Row& r : rows) std::printf("%-40s %10.3f ms\n", r.backend.c_str(), r.ms);
      return 0;
    }
    const std::vector<int64_t> batches = args.quick ? std::vector<int64_t>{16} : std::vector<int64_t>{16, 32};
    const std::vector<int64_t> texts =
        args.quick ? std::vector<int64_t>{128, 256, 512} : std::vector<int64_t>{128, 256, 512, 1024, 2048};
    for (int64_t batch : batches) {
      for (int64_t text : texts) {
        const Input in = full_input(batch, text, 4 * text);
        bench_point("", in, batch, text, 4 * text);
      }
    }
    {
      const int64_t batch = args.quick ? 16 : 32, text = args.quick ? 512 : 2048;
      const Input in = random_length_input(batch, text, 4 * text);
      bench_point("random-lengths", in, batch, text, 4 * text);
    }
    {
      const Input in = training_input(32);
      bench_point("training-batch", in, 32, in.logp.size(1), in.logp.size(2));
    }

    std::printf("\n%-40s %4s %6s %7s %12s  %s\n", "backend", "B", "T", "S", "median ms", "paths");
    for (const Row& r : rows) {
      std::printf("%-40s %4lld %6lld %7lld %12.3f  %s\n", r.backend.c_str(), (long long)r.batch,
                  (long long)r.text, (long long)r.mel, r.ms, r.note.c_str());
    }
    std::ostringstream csv;
    csv << "backend,B,T,S,ms\n";
    for (const Row& r : rows) {
      csv << r.backend << "," << r.batch << "," << r.text << "," << r.mel << "," << r.ms << "\n";
    }
    std::printf("\n%s", csv.str().c_str());
    if (!args.csv.empty()) std::ofstream(args.csv) << csv.str();
    bool agree = true;
    for (const Row& r : rows) agree = agree && r.note != "DIFFERENT" && r.note != "ERROR";
    return agree ? 0 : 2;
  });
}
