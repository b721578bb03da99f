#include "bench/infer_bench.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/stats.h"
#include "models/glow_tts.h"
#include "models/modules.h"
#include "align/mas_compare.h"
#include "train/precision.h"
#include "infer/graphed_inference.h"

namespace monoflow::train {
namespace {

// Frames the model's duration rule gives for `length_scale` (GlowTTS::infer: ceil(exp(logw) *
// scale) per token, summed), from the encoder's log-durations.
int64_t frames_for(const torch::Tensor& logw, const torch::Tensor& x_mask, double length_scale) {
  return torch::ceil(torch::exp(logw) * x_mask * length_scale).sum().item<int64_t>();
}

// The length scale whose output is closest to `target` frames (bisection: frames grow with it).
double length_scale_for(models::GlowTTS& model, const torch::Tensor& text, const torch::Tensor& lengths,
                        int64_t target) {
  torch::NoGradGuard no_grad;
  auto enc = model->encoder->forward(text, lengths, torch::Tensor());
  const auto logw = enc.logw.to(torch::kFloat), x_mask = enc.x_mask.to(torch::kFloat);
  double lo = 1e-3, hi = 1.0;
  while (frames_for(logw, x_mask, hi) < target && hi < 1e6) hi *= 2;
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (lo + hi);
    (frames_for(logw, x_mask, mid) < target ? lo : hi) = mid;
  }
  return std::abs(frames_for(logw, x_mask, lo) - target) < std::abs(frames_for(logw, x_mask, hi) - target) ? lo : hi;
}

}  // namespace

InferBenchRow bench_inference(const InferBenchOptions& o, const std::string& precision, const std::string& mode) {
  const BenchSetup& s = o.setup;
  if (precision != "tf32" && precision != "fp32" && precision != "bf16") {
    throw UserError("--precisions: unknown '" + precision + "'; use tf32, fp32 or bf16");
  }
  if (mode != "eager" && mode != "graph" && mode != "graph-text" && mode != "graph-decoder") {
    throw UserError("--modes: unknown '" + mode + "'; use eager, graph, graph-text or graph-decoder");
  }
  if (mode != "eager" && !GraphedInference::supported(s.device)) {
    throw UserError("--modes " + mode + " needs a CUDA device (got " + s.device.str() + ")");
  }
  if (o.symbols < 1 || o.batch < 1 || o.target_frames < 1 || s.timed < 1 || s.warmup < 0) {
    throw UserError("bench_inference: symbols, batch, frames and calls must be positive");
  }
  set_allow_tf32(precision != "fp32");
  models::GlowTTS model = bench_model(s);
  model->eval();
  models::cache_inference_weights(*model);  // as synthesize does

  std::mt19937_64 rng(s.seed);
  std::uniform_int_distribution<int64_t> token(1, s.vocab - 1);
  std::vector<int64_t> ids(o.symbols);
  for (auto& id : ids) id = token(rng);
  const auto text = torch::tensor(ids, torch::kInt64).view({1, o.symbols}).to(s.device);
  const auto lengths = torch::full({1}, o.symbols, torch::kInt64).to(s.device);

  InferBenchRow row;
  row.precision = precision;
  row.mode = mode;
  row.symbols = o.symbols;
  row.batch = o.batch;
  row.length_scale = length_scale_for(model, text, lengths, o.target_frames);
  const auto texts = text.expand({o.batch, o.symbols}).contiguous();
  const auto texts_lengths = lengths.expand({o.batch}).contiguous();

  torch::NoGradGuard no_grad;
  const models::Bf16Autocast autocast(precision == "bf16", s.device);
  std::unique_ptr<GraphedInference> graphed;
  if (mode != "eager") {
    graphed = std::make_unique<GraphedInference>(
        model, GraphedInferenceOptions().graph_text(mode != "graph-decoder").graph_prior(mode == "graph"));
  }
  std::vector<double> ms;
  for (int i = 0; i < s.warmup + s.timed; ++i) {
    align::synchronize(s.device);
    const auto start = std::chrono::steady_clock::now();
    const auto out = graphed ? graphed->infer(texts, texts_lengths, torch::Tensor(), o.noise_scale, row.length_scale)
                             : model->infer(texts, texts_lengths, torch::Tensor(), o.noise_scale, row.length_scale);
    align::synchronize(s.device);
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= s.warmup) ms.push_back(elapsed);
    row.frames = static_cast<int>(out.y.size(2));
  }
  if (!o.profile_path.empty()) {
    profile_calls(o.profile_path, o.profiled_calls, s.device, "monoflow_call", [&] {
      graphed ? graphed->infer(texts, texts_lengths, torch::Tensor(), o.noise_scale, row.length_scale)
              : model->infer(texts, texts_lengths, torch::Tensor(), o.noise_scale, row.length_scale);
    });
  }
  row.ms = median(ms);
  row.ms_min = *std::min_element(ms.begin(), ms.end());
  row.ms_max = *std::max_element(ms.begin(), ms.end());
  row.ms_p90 = percentile(ms, 0.9);
  row.frames_per_s = row.ms > 0 ? 1000.0 * row.batch * row.frames / row.ms : 0.0;
  return row;
}

std::string infer_csv_header() {
  return "precision,mode,symbols,frames,length_scale,ms,ms_min,ms_p90,ms_max,frames_per_s,batch";
}

std::string infer_csv_row(const InferBenchRow& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%s,%s,%d,%d,%.4f,%.3f,%.3f,%.3f,%.3f,%.1f,%d", r.precision.c_str(),
                r.mode.c_str(), r.symbols, r.frames, r.length_scale, r.ms, r.ms_min, r.ms_p90, r.ms_max, r.frames_per_s,
                r.batch);
  return line;
}

}  // namespace monoflow::train
