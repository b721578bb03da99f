#include "train/graphed_step.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <tuple>

#include "align/mas.h"
#include "common/error.h"
#include "train/bucket_lengths.h"
#include "train/distributed/flat_gradient_average.h"
#include "train/graph_capture.h"

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace monoflow::train {

bool GraphedTrainStep::supported(const torch::Device& device, const StepOptions& options) {
#ifdef MONOFLOW_HAS_CUDA
  // The cpu MAS backend copies logp to the host and waits for it: nothing a graph can hold.
  return device.is_cuda() && options.mas.backend != align::Backend::kCpu;
#else
  (void)device;
  (void)options;
  return false;
#endif
}

#ifdef MONOFLOW_HAS_CUDA
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The decoder's k-wide convolutions, for BucketLengths.
BucketLengthOptions decoder_conv_shape(const models::GlowTTSOptions& m, bool bf16) {
  return BucketLengthOptions()
      .channels(m.decoder_channels())
      .kernel_size(m.kernel_size_dec())
      .dilation_rate(m.dilation_rate())
      .n_block_layers(m.n_block_layers())
      .n_blocks(m.n_blocks_dec())
      .n_sqz(m.n_sqz())
      .dtype(bf16 ? torch::kBFloat16 : torch::kFloat32);
}

// dst[..., :n, ...] = src along `dim` (n = src's size there), zeros after it. Asynchronous
// from pinned host memory or from the device.
void copy_padded(torch::Tensor& dst, const torch::Tensor& src, int64_t dim) {
  const int64_t n = src.size(dim);
  dst.narrow(dim, 0, n).copy_(src, /*non_blocking=*/true);
  if (n < dst.size(dim)) dst.narrow(dim, n, dst.size(dim) - n).zero_();
}

// B, T and the mel bucket (one rank) or the ranks' agreed padded mel length (several).
using Shape = std::tuple<int64_t, int64_t, int64_t>;

// One captured step for one padded shape.
struct Entry {
  Shape shape;
  data::Batch in;  // the graph's inputs, written before each replay
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  StepResult out;  // tensors of the graph's pool: valid until the next replay of any graph
  bool searched = false;  // recorded with cuDNN's algorithm search
  uint64_t last_used = 0;
};

// What a shape has earned towards its search: kept when its graph is dropped.
struct ShapeHistory {
  bool searched = false;
  double replayed_ms = 0;  // GPU time of its replays with the heuristics' algorithms
};

// One replay of a heuristic graph between two timing events, read once the GPU has passed them.
struct ReplayTiming {
  Shape shape;
  at::cuda::CUDAEvent start{cudaEventDefault}, stop{cudaEventDefault};
};

}  // namespace

struct GraphedTrainStep::Impl {
  models::GlowTTS model;
  FusedAdam& optimizer;
  StepOptions options;
  GraphBuckets buckets;
  torch::Device device;
  // Every gradient is a view of `flat`, which starts with kShared more values that travel with
  // them: [this rank skips, loss_mle, loss_dur]. With several ranks, the all-reduces of flat's
  // buckets average all of it without copies, so every rank makes the same skip decision and
  // logs the mean losses; all buckets but the one holding these values start during backward.
  static constexpr int64_t kShared = 3;
  static constexpr int64_t kHead = 4;  // kShared and one unused: the gradients stay 16-byte aligned
  torch::Tensor flat, shared, gradients;  // gradients: flat past its head, every gradient in turn
  std::vector<torch::Tensor> params, grads;  // grads: persistent views of `flat`
  std::unique_ptr<FlatGradientAverage> average;  // several ranks: averaged inside the graph
  std::optional<BucketLengths> lengths;  // GraphBuckets::measured_lengths
  std::optional<CapturePool> pool;   // one memory pool and capture stream for all graphs
  std::map<Shape, Entry> entries;
  Entry* last = nullptr;
  uint64_t clock = 0;
  GraphRecording recording;
  SearchSchedule schedule;
  std::map<Shape, ShapeHistory> history;
  std::deque<ReplayTiming> timings;  // in flight, oldest first

  // Device scalars outside the graphs' pool, read or written by every replay.
  torch::Tensor lr, step_number, flags, found_inf, loss_mle, loss_dur, grad_norm;
  torch::Tensor skipped, run, longest_run, error_step, error_item;

  Impl(models::GlowTTS m, FusedAdam& opt, const StepOptions& o, GraphBuckets b, int64_t skipped_before)
      : model(std::move(m)),
        optimizer(opt),
        options(o),
        buckets(b),
        device(model->parameters().front().device()),
        schedule(several_ranks(o) ? CudnnSearch::kAlways : b.cudnn_search) {
    if (!GraphedTrainStep::supported(device, options)) {
      throw UserError("CUDA graphs need a CUDA device and a CUDA MAS backend (run.cuda_graphs: false otherwise)");
    }
    if (buckets.text_multiple < 1 || buckets.mel_multiple < 1 || buckets.max_graphs < 1) {
      throw UserError("graph buckets: text and mel multiples and max_graphs must be >= 1");
    }
    buckets.mel_multiple = buckets.mel_multiple_for(model->options().n_sqz());
    if (buckets.measured_lengths) lengths.emplace(decoder_conv_shape(model->options(), options.bf16), device);
    const c10::cuda::CUDAGuard guard(device);
    torch::NoGradGuard no_grad;
    int64_t numel = 0;
    std::vector<torch::Tensor> trained;
    for (auto& p : model->parameters()) {
      if (!p.requires_grad()) continue;
      TORCH_CHECK(p.scalar_type() == torch::kFloat32 && p.is_contiguous(),
                  "CUDA graphs: parameters must be contiguous float32");
      trained.push_back(p);
      numel += p.numel();
    }
    // Sizes that are not a multiple of 4 last (the duration predictor's one-value bias): every
    // other gradient, and every parameter once FusedAdam::flatten lays them out the same way,
    // then starts 16-byte aligned, as vectorised kernels and cuBLAS want.
    std::stable_partition(trained.begin(), trained.end(), [](const torch::Tensor& p) { return p.numel() % 4 == 0; });
    flat = torch::zeros({kHead + numel}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    shared = flat.narrow(0, 0, kShared);
    gradients = flat.narrow(0, kHead, numel);
    int64_t offset = kHead;
    for (auto& p : trained) {
      p.mutable_grad() = flat.narrow(0, offset, p.numel()).view_as(p);
      grads.push_back(p.grad());
      offset += p.numel();
    }
    params = std::move(trained);
    Distributed* dist = options.distributed;
    if (dist != nullptr && dist->world_size() > 1) {
      average = std::make_unique<FlatGradientAverage>(*dist, params, grads, flat, kHead, buckets.gradient_bucket_bytes,
                                                      buckets.first_gradient_bucket_bytes);
      // NCCL makes its communicator at a group's first collective, which no capture may hold.
      dist->start_sum(flat)();  // of zeros
    }
    optimizer.init_state();
    optimizer.flatten(gradients);  // one Adam kernel over flat buffers; per parameter if it declines
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    const auto i64 = f32.dtype(torch::kInt64);
    lr = torch::zeros({}, f32);
    found_inf = torch::zeros({}, f32);
    loss_mle = torch::zeros({}, f32);
    loss_dur = torch::zeros({}, f32);
    grad_norm = torch::zeros({}, f32);
    step_number = torch::zeros({}, i64);
    skipped = torch::full({}, skipped_before, i64);
    run = torch::zeros({}, i64);
    longest_run = torch::zeros({}, i64);
    flags = torch::zeros({align::kMasFlagCount}, f32.dtype(torch::kInt32));
    error_step = torch::zeros({align::kMasFlagCount}, i64);
    error_item = torch::full({align::kMasFlagCount}, -1, i64);
    options.check_finite = true;
    options.mas.deferred_flags = flags;
    pool.emplace(device);
  }

  static bool several_ranks(const StepOptions& o) { return o.distributed != nullptr && o.distributed->world_size() > 1; }

  // The mel length to pad a bucket of `mel` frames to: a little more where the decoder's
  // convolutions measure slow there (measured once per (batch, mel), then looked up).
  int64_t padded_frames(int64_t batch, int64_t mel) {
    if (!lengths) return mel;
    const auto start = Clock::now();
    const int64_t frames = lengths->choose(batch, mel);
    recording.lengths_ms += ms_since(start);
    return frames;
  }

  // One rank: h's bucket. Several: all replay the same shape (the largest of theirs, at a
  // length that rank measured fast), so that they step in lock-step and each graph's all-reduce
  // meets its twin on every other rank.
  Shape shape_of(const data::Batch& h) {
    const int64_t b = h.text.size(0), t = round_up(h.text.size(1), buckets.text_multiple);
    const int64_t mel = round_up(h.mel.size(2), buckets.mel_multiple);
    if (average == nullptr) return {b, t, mel};
    const std::vector<int64_t> m = options.distributed->max_over_ranks({t, padded_frames(b, mel)});
    return {b, m[0], m[1]};
  }

  // The GPU time of heuristic replays the device has finished, to their shapes' accounts.
  void collect_replay_times() {
    while (!timings.empty() && timings.front().stop.query()) {
      history[timings.front().shape].replayed_ms += timings.front().start.elapsed_time(timings.front().stop);
      timings.pop_front();
    }
  }

  void upload(Entry& e, const data::Batch& h) {
    copy_padded(e.in.text, h.text, 1);
    e.in.text_lengths.copy_(h.text_lengths, true);
    copy_padded(e.in.mel, h.mel, 2);
    e.in.mel_lengths.copy_(h.mel_lengths, true);
    if (h.speakers.defined() != e.in.speakers.defined()) {
      throw UserError("a batch with speaker ids mixed with batches without (one model, one kind of data)");
    }
    if (h.speakers.defined()) e.in.speakers.copy_(h.speakers, true);
    e.in.ids = h.ids;
  }

  // Backward into `flat`. Autograd hands back fresh gradients and multi-tensor copies move
  // them into their views: accumulating into the views instead (backward() onto defined .grad)
  // costs an add kernel per parameter, ~530 a step, 0.8-1.0 ms of a graphed step on an H100.
  // With `overlap` (several ranks, in the captured step) the copies go bucket by bucket, each
  // bucket's all-reduce starting as it fills.
  void backward_into_flat(const torch::Tensor& loss, bool overlap) {
    if (overlap) average->arm();
    std::vector<torch::Tensor> produced = torch::autograd::grad({loss}, params, /*grad_outputs=*/{},
                                                                /*retain_graph=*/false, /*create_graph=*/false,
                                                                /*allow_unused=*/true);
    if (overlap) average->finish_backward(produced);
    else copy_gradients(grads, produced);
  }

  // What every replay does: train_step with the host's decisions on the device.
  void body(Entry& e) {
    Losses l = forward_losses(model, e.in, options);
    const torch::Tensor loss = l.mle + l.dur;
    backward_into_flat(loss, average != nullptr);
    torch::NoGradGuard no_grad;
    const torch::Tensor bad = flags.gt(0);
    const torch::Tensor skip_here = torch::logical_or(torch::isfinite(loss).logical_not(), bad.any());
    shared.copy_(torch::stack({skip_here.to(torch::kFloat32), l.mle.detach(), l.dur.detach()}));
    if (average != nullptr) average->average();
    const torch::Tensor norm = clip_gradients(gradients, options.grad_clip_value);
    const torch::Tensor found = shared[0].gt(0);
    found_inf.copy_(found);
    optimizer.step_on_device(lr, found_inf);
    loss_mle.copy_(shared[1]);
    loss_dur.copy_(shared[2]);
    grad_norm.copy_(norm);
    const torch::Tensor count = found.to(torch::kInt64);
    skipped.add_(count);
    run.add_(count).mul_(count);  // consecutive skipped updates up to this one
    longest_run.copy_(torch::maximum(longest_run, run));
    const torch::Tensor first = error_step.eq(0).logical_and(bad);
    error_step.copy_(torch::where(first, step_number, error_step));
    error_item.copy_(torch::where(first, e.in.text.size(0) - flags.to(torch::kInt64), error_item));

    // What the trainer reads back: alignment images and --compare-align.
    models::GlowTTSOutput& o = l.out;
    e.out = StepResult{};
    e.out.loss_mle = loss_mle;
    e.out.loss_dur = loss_dur;
    e.out.grad_norm = grad_norm;
    e.out.out.z = o.z.detach();
    e.out.out.x_m = o.x_m.detach();
    e.out.out.x_logs = o.x_logs.detach();
    e.out.out.attn = o.attn.detach();
    e.out.out.durations = o.durations;
    e.out.out.y_lengths = o.y_lengths;
    e.out.out.z_mask = o.z_mask;
    e.out.out.x_mask = o.x_mask;
  }

  // Forward and backward once outside a graph on the capture stream, so that libraries set
  // up their handles and workspaces there before capture; no update, RNG state restored.
  void warm_up(Entry& e) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index());
    const torch::Tensor rng = gen.get_state();
    {
      Losses l = forward_losses(model, e.in, options);
      backward_into_flat(l.mle + l.dur, /*overlap=*/false);
    }
    flat.zero_();
    flags.zero_();
    gen.set_state(rng);
  }

  void capture(Entry& e) {
    const auto start = Clock::now();
    double warm_up_ms = 0;
    e.graph = record_graph(
        *pool,
        [&] {
          const auto warm_start = Clock::now();
          warm_up(e);
          c10::cuda::getCurrentCUDAStream(device.index()).synchronize();  // its GPU time counts
          warm_up_ms = ms_since(warm_start);
        },
        [&] { body(e); }, e.searched);
    recording.warm_up_ms += warm_up_ms;
    recording.capture_ms += ms_since(start) - warm_up_ms;  // record_graph ends with a device wait
    ++recording.graphs;
  }

  // h's shape recorded, with cuDNN's algorithm search or its heuristics, h uploaded.
  Entry record(const Shape& shape, const data::Batch& h, bool search) {
    const auto [b, t, m] = shape;
    const double cost_before = recording.lengths_ms + recording.warm_up_ms;
    // Bucket lengths are timed with the searched algorithms; several ranks agreed on theirs.
    const int64_t frames = search && average == nullptr ? padded_frames(b, m) : m;
    Entry e;
    e.shape = shape;
    e.searched = search;
    const auto on_device = torch::TensorOptions().device(device);
    e.in.text = torch::zeros({b, t}, on_device.dtype(torch::kInt64));
    e.in.text_lengths = torch::zeros({b}, on_device.dtype(torch::kInt64));
    e.in.mel = torch::zeros({b, h.mel.size(1), frames}, on_device.dtype(torch::kFloat32));
    e.in.mel_lengths = torch::zeros({b}, on_device.dtype(torch::kInt64));
    if (h.speakers.defined()) e.in.speakers = torch::zeros({b}, on_device.dtype(torch::kInt64));
    upload(e, h);
    capture(e);
    if (search) {
      ++recording.searched;
      schedule.searched(recording.lengths_ms + recording.warm_up_ms - cost_before);
    }
    return e;
  }

  // The entry for h's padded shape with h uploaded into its inputs: a new shape is recorded, and
  // a shape recorded with the heuristics is recorded again once it has earned the search.
  Entry& prepare(const data::Batch& h) {
    const Shape shape = shape_of(h);
    ShapeHistory& past = history[shape];
    const bool search = past.searched || schedule.search_now(past.replayed_ms);
    auto it = entries.find(shape);
    if (it != entries.end() && (it->second.searched || !search)) {
      upload(it->second, h);
      return it->second;
    }
    Entry recorded = record(shape, h, search);
    past.searched = search;
    if (it != entries.end()) {  // replaced only now: its graph kept the shared pool alive meanwhile
      it->second = std::move(recorded);
      return it->second;
    }
    Entry& e = entries.emplace(shape, std::move(recorded)).first->second;
    if (drop_oldest(entries, buckets.max_graphs, e) == last) last = nullptr;
    return e;
  }

  StepResult step(const data::Batch& h, double lr_value, int64_t step) {
    const c10::cuda::CUDAGuard guard(device);
    collect_replay_times();
    Entry& e = prepare(h);
    lr.fill_(lr_value);
    step_number.fill_(step);
    if (e.searched) {
      e.graph->replay();
    } else {
      const auto stream = c10::cuda::getCurrentCUDAStream(device.index());
      ReplayTiming& timing = timings.emplace_back();
      timing.shape = e.shape;
      timing.start.record(stream);
      e.graph->replay();
      timing.stop.record(stream);
    }
    e.last_used = ++clock;
    last = &e;
    return e.out;
  }

  // [loss_mle, loss_dur, grad_norm, skipped, longest_run, error_step[], error_item[]] as
  // float64 (the counters are exact there), copied into pinned memory behind the last step.
  torch::Tensor readback_host;
  std::optional<at::cuda::CUDAEvent> readback_done;

  torch::Tensor readback_values() const {
    const auto f64 = [](const torch::Tensor& t) { return t.reshape(-1).to(torch::kFloat64); };
    return torch::cat({f64(loss_mle), f64(loss_dur), f64(grad_norm), f64(skipped), f64(longest_run), f64(error_step),
                       f64(error_item)});
  }

  static GraphReadback decode(const double* v) {
    const auto at = [&](int64_t i) { return static_cast<int64_t>(v[i]); };
    GraphReadback r;
    r.loss_mle = v[0];
    r.loss_dur = v[1];
    r.grad_norm = v[2];
    r.status.skipped = at(3);
    r.status.longest_nonfinite_run = at(4);
    r.status.bad_lengths_step = at(5 + align::kMasFlagBadLengths);
    r.status.bad_lengths_item = at(5 + align::kMasFlagCount + align::kMasFlagBadLengths);
    r.status.timeout_step = at(5 + align::kMasFlagTimeout);
    return r;
  }

  void start_readback() {
    TORCH_CHECK(!readback_done.has_value(), "GraphedTrainStep::start_readback: the last one was not finished");
    const c10::cuda::CUDAGuard guard(device);
    const torch::Tensor all = readback_values();
    if (!readback_host.defined()) {
      readback_host = torch::empty({all.numel()}, torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(true));
    }
    readback_host.copy_(all, /*non_blocking=*/true);
    readback_done.emplace();
    readback_done->record(c10::cuda::getCurrentCUDAStream(device.index()));
  }

  GraphReadback finish_readback() {
    TORCH_CHECK(readback_done.has_value(), "GraphedTrainStep::finish_readback without start_readback");
    readback_done->synchronize();
    readback_done.reset();
    return decode(readback_host.data_ptr<double>());
  }

  // Apart from the readback above, which may be under way.
  GraphStatus status() {
    const c10::cuda::CUDAGuard guard(device);
    const torch::Tensor all = readback_values().to(torch::kCPU);
    return decode(all.data_ptr<double>()).status;
  }
};

GraphedTrainStep::GraphedTrainStep(models::GlowTTS model, FusedAdam& optimizer, const StepOptions& options,
                                   GraphBuckets buckets, int64_t skipped_before)
    : impl_(std::make_unique<Impl>(std::move(model), optimizer, options, buckets, skipped_before)) {}

GraphedTrainStep::~GraphedTrainStep() = default;

StepResult GraphedTrainStep::step(const data::Batch& host, double lr, int64_t step) {
  return impl_->step(host, lr, step);
}

const data::Batch& GraphedTrainStep::inputs() const {
  TORCH_CHECK(impl_->last != nullptr, "GraphedTrainStep::inputs: no step yet");
  return impl_->last->in;
}

GraphStatus GraphedTrainStep::status() { return impl_->status(); }

void GraphedTrainStep::start_readback() { impl_->start_readback(); }

GraphReadback GraphedTrainStep::finish_readback() { return impl_->finish_readback(); }

size_t GraphedTrainStep::graphs() const { return impl_->entries.size(); }

GraphRecording GraphedTrainStep::recording() const { return impl_->recording; }

int GraphedTrainStep::gradient_buckets() const { return impl_->average ? impl_->average->buckets() : 0; }

int GraphedTrainStep::buckets_started_in_backward() const {
  return impl_->average ? impl_->average->overlapped() : 0;
}

#else  // no CUDA: the type exists, but cannot be made

struct GraphedTrainStep::Impl {};

GraphedTrainStep::GraphedTrainStep(models::GlowTTS, FusedAdam&, const StepOptions&, GraphBuckets, int64_t) {
  throw UserError("monoflow was built without CUDA: CUDA graphs are not available (run.cuda_graphs: off)");
}
GraphedTrainStep::~GraphedTrainStep() = default;
StepResult GraphedTrainStep::step(const data::Batch&, double, int64_t) { return {}; }
const data::Batch& GraphedTrainStep::inputs() const { throw UserError("no CUDA"); }
GraphStatus GraphedTrainStep::status() { return {}; }
void GraphedTrainStep::start_readback() {}
GraphReadback GraphedTrainStep::finish_readback() { return {}; }
size_t GraphedTrainStep::graphs() const { return 0; }
GraphRecording GraphedTrainStep::recording() const { return {}; }
int GraphedTrainStep::gradient_buckets() const { return 0; }
int GraphedTrainStep::buckets_started_in_backward() const { return 0; }

#endif

}  // namespace monoflow::train
