#include "bench/step_bench.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/error.h"
#include "common/synthetic_batch.h"
#include "models/glow_tts.h"
#include "align/mas_compare.h"
#include "train/distributed/gradient_reducer.h"
#include "train/fused_adam.h"
#include "train/graph_capture.h"  // round_up
#include "train/graphed_step.h"
#include "train/lr_schedule.h"
#include "common/stats.h"
#include "train/precision.h"
#include "train/train_step.h"

namespace monoflow::train {

std::vector<data::Batch> synthetic_batches(int count, int batch_size, int vocab, int n_mels, uint64_t seed) {
  SyntheticBatches gen(seed);  // the lengths; each batch's tokens and values follow in its stream
  std::mt19937_64& rng = gen.rng();
  std::uniform_int_distribution<int64_t> token(1, vocab - 1);
  std::normal_distribution<float> mel_value(-5.0f, 2.0f);  // log-mel magnitudes of speech
  std::vector<data::Batch> out;
  for (int i = 0; i < count; ++i) {
    const SyntheticLengths lengths = gen.next_lengths(batch_size);
    const std::vector<int64_t>& t_len = lengths.text;
    const std::vector<int64_t>& m_len = lengths.mel;
    const int64_t t_max = lengths.max_text(), m_max = lengths.max_mel();
    data::Batch batch;
    batch.text = torch::zeros({batch_size, t_max}, torch::kInt64);
    batch.mel = torch::zeros({batch_size, n_mels, m_max}, torch::kFloat32);
    auto text = batch.text.accessor<int64_t, 2>();
    auto mel = batch.mel.accessor<float, 3>();
    for (int b = 0; b < batch_size; ++b) {
      for (int64_t t = 0; t < t_len[b]; ++t) text[b][t] = token(rng);
      for (int c = 0; c < n_mels; ++c) {
        for (int64_t s = 0; s < m_len[b]; ++s) mel[b][c][s] = mel_value(rng);
      }
      batch.ids.push_back("synthetic_" + std::to_string(i) + "_" + std::to_string(b));
    }
    batch.text_lengths = torch::tensor(t_len, torch::kInt64);
    batch.mel_lengths = torch::tensor(m_len, torch::kInt64);
    out.push_back(std::move(batch));
  }
  return out;
}

data::Batch padded_as_graphed(const data::Batch& b, int64_t n_sqz) {
  const GraphBuckets buckets;
  const int64_t t = b.text.size(1), frames = b.mel.size(2);
  data::Batch out = b;
  out.text = torch::constant_pad_nd(b.text, {0, round_up(t, buckets.text_multiple) - t});
  out.mel = torch::constant_pad_nd(b.mel, {0, round_up(frames, buckets.mel_multiple_for(n_sqz)) - frames});
  return out;
}

StepBenchRow bench_train_step(const StepBenchOptions& o, align::Backend backend, const std::string& precision,
                              const std::string& mode, const std::vector<data::Batch>& host_batches) {
  const BenchSetup& s = o.setup;
  if (precision != "tf32" && precision != "fp32" && precision != "bf16") {
    throw UserError("--precision: unknown '" + precision + "'; use tf32, fp32 or bf16");
  }
  // (GraphedTrainStep refuses a CPU device or the cpu MAS backend itself.)
  if (mode != "eager" && mode != "eager-padded" && mode != "graph" && mode != "graph-fixed") {
    throw UserError("--modes: unknown '" + mode + "'; use eager, eager-padded, graph or graph-fixed");
  }
  const bool eager = is_eager_mode(mode);
  if (!align::backend_available(backend) || (backend != align::Backend::kCpu && !s.device.is_cuda())) {
    throw UserError("--backends: " + align::backend_name(backend) + " is not available here");
  }
  set_allow_tf32(precision != "fp32");
  std::vector<data::Batch> batches;
  for (const auto& b : host_batches) {
    batches.push_back(
        to_device(mode == "eager-padded" ? padded_as_graphed(b, s.config.model.n_sqz()) : b, s.device));
  }

  models::GlowTTS model = bench_model(s);
  model->train();
  const auto& t = s.config.train;
  FusedAdam optimizer(model->parameters(),
                               torch::optim::AdamOptions(t.learning_rate).betas({t.betas[0], t.betas[1]}).eps(t.eps));
  const LrSchedule schedule(t.scheduler, t.learning_rate, s.config.model.hidden_channels(), t.warmup_steps);

  StepOptions so;
  so.mas.backend = backend;
  so.mas.neg_inf = static_cast<float>(s.config.run.mas_neg_inf);
  so.grad_clip_value = t.grad_clip_value;
  so.bf16 = precision == "bf16";
  so.check_finite = false;  // the spec's step: forward, MAS, backward, clipping, optimizer step

  {  // DDI on the first batch, as training starts (not timed)
    torch::NoGradGuard no_grad;
    model->set_ddi(true);
    const auto& b = batches[0];
    model->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, b.speakers, so.mas);
  }
  const int ranks = o.distributed != nullptr ? o.distributed->world_size() : 1;
  std::unique_ptr<GradientReducer> reducer;
  if (ranks > 1) {  // as the trainer: one set of weights, gradients averaged
    so.distributed = o.distributed;
    o.distributed->broadcast_module(*model);
    if (eager) {
      reducer = std::make_unique<GradientReducer>(*o.distributed, model->parameters());
      so.reducer = reducer.get();
    }
  }
  std::unique_ptr<GraphedTrainStep> graphed;
  if (!eager) {
    GraphBuckets buckets;
    buckets.measured_lengths = mode == "graph";
    buckets.cudnn_search = CudnnSearch::kAlways;  // the steady state: every shape searched at once
    graphed = std::make_unique<GraphedTrainStep>(model, optimizer, so, buckets);
  }
  int64_t step = 0;
  auto run_step = [&]() {
    const auto& b = batches[step % batches.size()];
    ++step;
    return graphed ? graphed->step(b, schedule.lr(step), step) : train_step(model, optimizer, b, schedule.lr(step), so);
  };
  // Two peaks. Over the warm-up, which records the graphs: the most tensor memory allocated
  // at once (cuDNN's algorithm search there may try a workspace as large as the free memory,
  // for a moment). Over the timed steps: the most device memory the allocator held (reserved),
  // which is what training occupies; a graph's pool counts as held even between replays, when
  // none of its tensors is allocated.
  StepBenchRow row;
  auto peak_mib = [&](bool reserved) {
    const auto stats = c10::getDeviceAllocator(c10::kCUDA)->getDeviceStats(s.device.index());
    const auto& stat = reserved ? stats.reserved_bytes : stats.allocated_bytes;
    return static_cast<double>(stat[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak) /
           (1024.0 * 1024.0);
  };
  if (s.device.is_cuda()) c10::getDeviceAllocator(c10::kCUDA)->resetPeakStats(s.device.index());
  for (int i = 0; i < s.warmup; ++i) run_step();
  align::synchronize(s.device);
  if (s.device.is_cuda()) {
    row.warmup_peak_memory_mib = peak_mib(false);
    c10::getDeviceAllocator(c10::kCUDA)->resetPeakStats(s.device.index());
  }

  std::vector<double> step_ms, mas_ms;
  for (int i = 0; i < s.timed; ++i) {
    const auto& b = batches[step % batches.size()];
    align::synchronize(s.device);
    const auto start = std::chrono::steady_clock::now();
    const StepResult r = run_step();
    align::synchronize(s.device);
    step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    row.nonfinite_steps += !torch::isfinite(r.loss_mle + r.loss_dur).item<bool>();
    const torch::Tensor logp =
        models::compute_logp(r.out.x_m.detach(), r.out.x_logs.detach(), r.out.z.detach()).to(torch::kFloat32);
    const torch::Tensor text_lengths = graphed ? graphed->inputs().text_lengths : b.text_lengths;
    mas_ms.push_back(
        align::timed_durations(logp, text_lengths, r.out.y_lengths, backend, so.mas.neg_inf, /*keep_input=*/false).second);
  }
  if (!o.profile_path.empty()) profile_calls(
        o.profile_path, o.profiled_steps, s.device, "monoflow_step", [&] { run_step(); }, o.profile_shapes);
  row.backend = align::backend_name(backend);
  row.precision = precision;
  row.mode = mode;
  row.graphs = graphed ? static_cast<int>(graphed->graphs()) : 0;
  row.grad_buckets = graphed ? graphed->gradient_buckets() : 0;
  row.buckets_in_backward = graphed ? graphed->buckets_started_in_backward() : 0;
  row.mel_frames = graphed ? graphed->inputs().mel.size(2) : batches[(step - 1) % batches.size()].mel.size(2);
  row.batch_size = o.batch_size;
  row.step_ms = median(step_ms);
  row.step_ms_min = *std::min_element(step_ms.begin(), step_ms.end());
  row.step_ms_max = *std::max_element(step_ms.begin(), step_ms.end());
  row.step_ms_p90 = percentile(step_ms, 0.9);
  row.mas_ms = median(mas_ms);
  row.ranks = ranks;
  row.samples_per_s = row.step_ms > 0 ? ranks * o.batch_size * 1000.0 / row.step_ms : 0;
  if (s.device.is_cuda()) row.peak_memory_mib = peak_mib(true);
  return row;
}

std::string csv_header() {
  return "backend,precision,mode,B,step_ms,step_ms_min,step_ms_max,step_ms_p90,mas_ms,peak_mem_mib,samples_per_s,"
         "nonfinite_steps,graphs,ranks,warmup_peak_mem_mib,mel_frames,grad_buckets,buckets_in_backward";
}

std::string csv_row(const StepBenchRow& r) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s,%s,%s,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.0f,%.1f,%d,%d,%d,%.0f,%lld,%d,%d", r.backend.c_str(),
                r.precision.c_str(), r.mode.c_str(), r.batch_size, r.step_ms, r.step_ms_min, r.step_ms_max,
                r.step_ms_p90, r.mas_ms, r.peak_memory_mib, r.samples_per_s, r.nonfinite_steps, r.graphs, r.ranks,
                r.warmup_peak_memory_mib, static_cast<long long>(r.mel_frames), r.grad_buckets, r.buckets_in_backward);
  return buf;
}

}  // namespace monoflow::train
