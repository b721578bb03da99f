#include "infer/graphed_inference.h"

#include <iterator>
#include <map>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "models/modules.h"
#include "train/graph_capture.h"

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace monoflow::train {

bool GraphedInference::supported(const torch::Device& device) {
#ifdef MONOFLOW_HAS_CUDA
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

#ifdef MONOFLOW_HAS_CUDA
namespace {

// Where and how a stage records its graphs.
struct Recorder {
  std::shared_ptr<const CapturePool> pool;  // shared by the recorders whose graphs share it
  size_t max_graphs;
  int eager_uses;
};

// One stage's graphs by shape. Entry: a struct with `graph` and `last_used`.
template <typename Key, typename Entry>
struct GraphCache {
  std::map<Key, Entry> entries;
  std::map<Key, int> eager_runs;  // shapes without a graph yet: how often each ran eagerly

  // The entry for `key` with the call's inputs copied in (`fill`), recorded at the key's
  // (eager_uses + 1)-th use (`allocate` gives it its input tensors, `body` is what the graph
  // holds); null while the key still runs eagerly. Past max_graphs the least recently used
  // other entry goes, after the capture (see drop_oldest).
  template <typename Allocate, typename Fill, typename Body>
  Entry* find_or_record(const Key& key, const Recorder& r, Allocate&& allocate, Fill&& fill, Body&& body) {
    auto it = entries.find(key);
    if (it != entries.end()) {
      fill(it->second);
      return &it->second;
    }
    if (eager_runs[key]++ < r.eager_uses) return nullptr;
    eager_runs.erase(key);
    Entry& e = entries[key];
    try {
      allocate(e);
      fill(e);
      e.graph = record_graph(*r.pool, [&] { body(e); }, [&] { body(e); });
    } catch (...) {
      entries.erase(key);
      throw;
    }
    drop_oldest(entries, r.max_graphs, e);
    return &e;
  }
};

template <typename Entry>
void replay(Entry& e, uint64_t& clock) {
  e.graph->replay();
  e.last_used = ++clock;
}

}  // namespace

struct GraphedInference::Impl {
  // The prior for one frame bucket of a text graph: inputs (the noise padded to the bucket,
  // the noise scale; the rest are the text graph's outputs) and outputs (expand_prior's).
  struct PriorEntry {
    torch::Tensor noise, noise_scale;
    models::InferenceOutput out;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    uint64_t last_used = 0;
  };

  // The encoder and the durations for one text shape: inputs (text padded with zeros to a
  // multiple of kTextMultiple tokens, its lengths, g, the length scale), outputs
  // (infer_durations, over the padded tokens) and its graph.
  struct TextEntry {
    torch::Tensor text, text_lengths, g, length_scale;
    models::InferenceOutput out;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    uint64_t last_used = 0;
  };
  using TextShape = std::tuple<int64_t, int64_t, bool>;  // batch, padded tokens, speakers
  static constexpr int64_t kTextMultiple = 16;
  using PriorShape = std::pair<TextShape, int64_t>;       // the text graph's, padded frames

  // The decoder's inputs and output for one shape, and its graph.
  struct DecoderEntry {
    torch::Tensor z, z_mask, g, y;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    uint64_t last_used = 0;
  };
  using DecoderShape = std::tuple<int64_t, int64_t, bool>;  // batch, padded frames, speakers

  models::GlowTTS model;
  GraphedInferenceOptions options;
  torch::Device device;
  // One memory pool for the decoder, one for the text and prior graphs: a graph can reuse the
  // temporaries of the others of its pool, which replay at other times, while the text and
  // prior graphs' outputs must outlive the decoder's replay in the same call (they are returned
  // with its mel). A prior graph replays right after its text graph, whose outputs it reads.
  // max_graphs bounds the prior graphs over all text graphs, not per text graph: each holds
  // [B, n_mels, frames] buffers, as large as a decoder graph's inputs.
  Recorder decoder_recorder, text_recorder, prior_recorder;
  GraphCache<TextShape, TextEntry> texts;
  GraphCache<PriorShape, PriorEntry> priors;  // after texts, so destroyed before the graphs they read
  GraphCache<DecoderShape, DecoderEntry> decoders;
  TextEntry* last_text = nullptr;  // whose outputs infer_lengths() returned last; null: eager
  TextShape last_text_shape;
  uint64_t clock = 0;

  Impl(models::GlowTTS m, const GraphedInferenceOptions& o)
      : model(std::move(m)), options(o), device(model->parameters().front().device()),
        decoder_recorder{std::make_shared<CapturePool>(device), o.max_graphs(), o.eager_uses()},
        text_recorder{std::make_shared<CapturePool>(device), o.max_graphs(), o.eager_uses()},
        prior_recorder{text_recorder.pool, o.max_graphs(), o.eager_uses()} {
    // The graphs read the inverse 1x1 weights kept from their recording (a recording cannot
    // copy to the host, where they are computed).
    models::cache_inference_weights(*model);
  }

  // infer_lengths() with the encoder and the durations replayed from the text shape's graph.
  models::InferenceOutput lengths(const torch::Tensor& text_in, const torch::Tensor& text_lengths_in,
                                  const torch::Tensor& speakers, double length_scale) {
    last_text = nullptr;
    const auto text = text_in.to(device);
    const auto text_lengths = text_lengths_in.to(device, torch::kLong);
    const int64_t b = text.size(0), t = text.size(1);
    if (!options.graph_text()) return model->infer_lengths(text, text_lengths, speakers, length_scale);
    const torch::Tensor g = model->speaker_vector(speakers, b);
    const TextShape shape{b, round_up(t, kTextMultiple), g.defined()};
    const auto allocate = [&](TextEntry& e) {
      e.text = torch::zeros({b, std::get<1>(shape)}, text.options());
      e.text_lengths = torch::empty_like(text_lengths);
      if (g.defined()) e.g = torch::empty_like(g);
      e.length_scale = torch::zeros({}, text.options().dtype(torch::kFloat64));
    };
    // Tokens past t keep an earlier text's: text_lengths masks them out of every valid
    // position (the encoder masks before each convolution and in attention), as the test's
    // shorter text after a longer one checks.
    const auto fill = [&](TextEntry& e) {
      e.text.narrow(1, 0, t).copy_(text);
      e.text_lengths.copy_(text_lengths);
      if (g.defined()) e.g.copy_(g);
      e.length_scale.fill_(length_scale);
    };
    const auto body = [&](TextEntry& e) {
      e.out = model->infer_durations(e.text, e.text_lengths, e.g, e.length_scale);
    };
    TextEntry* e = texts.find_or_record(shape, text_recorder, allocate, fill, body);
    drop_orphaned_priors();
    if (e == nullptr) return model->infer_lengths(text, text_lengths, speakers, length_scale);
    replay(*e, clock);
    last_text = e;
    last_text_shape = shape;
    // Cut back to the text's tokens: the padding tokens are masked, with no frames.
    models::InferenceOutput out = e->out;
    for (auto* x : {&out.w_ceil, &out.logw, &out.x_m, &out.x_logs, &out.x_mask}) *x = x->narrow(2, 0, t);
    out.max_frames = out.y_lengths.max().item<int64_t>();
    return out;
  }

  // Whether `out` holds the last text graph's outputs, so that its prior graph can read them.
  bool from_text_graph(const models::InferenceOutput& out) const {
    if (last_text == nullptr || !options.graph_prior()) return false;
    const models::InferenceOutput& g = last_text->out;
    return out.w_ceil.defined() && out.x_m.defined() && out.x_logs.defined() && out.x_mask.defined() &&
           out.y_lengths.defined() && out.w_ceil.data_ptr() == g.w_ceil.data_ptr() &&
           out.x_m.data_ptr() == g.x_m.data_ptr() && out.x_logs.data_ptr() == g.x_logs.data_ptr() &&
           out.x_mask.data_ptr() == g.x_mask.data_ptr() && out.y_lengths.data_ptr() == g.y_lengths.data_ptr();
  }

  // infer_expand() for `out`: replayed from its text graph's prior graph for the frame bucket,
  // or eagerly (not the last text graph's outputs, or the bucket's eager uses).
  void expand(models::InferenceOutput& out, double noise_scale, const torch::Tensor& noise_in) {
    const int64_t frame_multiple = options.frame_multiple();
    const int64_t y_max = round_up(out.max_frames, frame_multiple);
    PriorEntry* p = nullptr;
    if (from_text_graph(out)) {
      TextEntry& t = *last_text;
      const auto allocate = [&](PriorEntry& e) {
        e.noise = torch::zeros({out.x_m.size(0), out.x_m.size(1), y_max}, t.out.x_mask.options());
        e.noise_scale = torch::zeros({}, e.noise.options());
      };
      const auto fill = [&](PriorEntry& e) {
        // The valid frames' draws, as infer_expand takes them.
        e.noise.narrow(2, 0, out.max_frames).copy_(models::prior_noise(out, noise_in, "GraphedInference::decode"));
        e.noise_scale.fill_(noise_scale);
      };
      const auto body = [&](PriorEntry& e) {
        e.out = t.out;
        model->expand_prior(e.out, y_max, e.noise, e.noise_scale);
      };
      p = priors.find_or_record(PriorShape{last_text_shape, y_max}, prior_recorder, allocate, fill, body);
    }
    if (p == nullptr) {
      model->infer_expand(out, noise_scale, frame_multiple, noise_in);
      return;
    }
    replay(*p, clock);
    out.z = p->out.z;
    out.z_m = p->out.z_m;
    out.z_logs = p->out.z_logs;
    out.z_mask = p->out.z_mask;
    out.attn = p->out.attn.narrow(1, 0, out.x_m.size(2));  // [B, tokens, frames]: the text's tokens
  }

  // A prior graph reads its text graph's outputs: when drop_oldest evicts a text graph, its
  // prior graphs go too (and their shapes' eager counts).
  void drop_orphaned_priors() {
    const auto drop = [&](auto& by_shape) {
      for (auto i = by_shape.begin(); i != by_shape.end();) {
        i = texts.entries.count(i->first.first) == 0 ? by_shape.erase(i) : std::next(i);
      }
    };
    drop(priors.entries);
    drop(priors.eager_runs);
  }

  // The decoder's reverse pass over the padded prior: its graph's output, or eager.
  torch::Tensor decode(const models::InferenceOutput& prior) {
    const DecoderShape shape{prior.z.size(0), prior.z.size(2), prior.g.defined()};
    const auto allocate = [&](DecoderEntry& e) {
      e.z = torch::empty_like(prior.z);
      e.z_mask = torch::empty_like(prior.z_mask);
      if (prior.g.defined()) e.g = torch::empty_like(prior.g);
    };
    const auto fill = [&](DecoderEntry& e) {
      e.z.copy_(prior.z);
      e.z_mask.copy_(prior.z_mask);
      if (prior.g.defined()) e.g.copy_(prior.g);
    };
    const auto body = [&](DecoderEntry& e) {
      e.y = model->decoder->forward(e.z, e.z_mask, e.g, /*reverse=*/true).first;
    };
    DecoderEntry* e = decoders.find_or_record(shape, decoder_recorder, allocate, fill, body);
    if (e == nullptr) return model->decoder->forward(prior.z, prior.z_mask, prior.g, /*reverse=*/true).first;
    replay(*e, clock);
    return e->y;
  }
};
#else
struct GraphedInference::Impl {};
#endif

GraphedInference::GraphedInference(models::GlowTTS model, const GraphedInferenceOptions& options) {
  const auto device = model->parameters().front().device();
  if (!supported(device)) throw UserError("graphed inference needs a CUDA device (got " + device.str() + ")");
  if (options.frame_multiple() < 1 || options.frame_multiple() % model->options().n_sqz() != 0 ||
      options.max_graphs() < 1 || options.eager_uses() < 0) {
    throw UserError(
        "graphed inference: frame_multiple must be a positive multiple of n_sqz, max_graphs >= 1, eager_uses >= 0");
  }
#ifdef MONOFLOW_HAS_CUDA
  impl_ = std::make_unique<Impl>(std::move(model), options);
#endif
}

GraphedInference::~GraphedInference() = default;

models::InferenceOutput GraphedInference::infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                                const torch::Tensor& speakers, double noise_scale,
                                                double length_scale) {
  return decode(infer_lengths(text, text_lengths, speakers, length_scale), noise_scale);
}

models::InferenceOutput GraphedInference::infer_lengths(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                                       const torch::Tensor& speakers, double length_scale) {
#ifdef MONOFLOW_HAS_CUDA
  torch::NoGradGuard no_grad;
  const c10::cuda::CUDAGuard guard(impl_->device);
  return impl_->lengths(text, text_lengths, speakers, length_scale);
#else
  (void)text, (void)text_lengths, (void)speakers, (void)length_scale;
  throw UserError("graphed inference needs a CUDA build");
#endif
}

models::InferenceOutput GraphedInference::decode(models::InferenceOutput out, double noise_scale,
                                                 const torch::Tensor& noise) {
#ifdef MONOFLOW_HAS_CUDA
  torch::NoGradGuard no_grad;
  const c10::cuda::CUDAGuard guard(impl_->device);
  impl_->expand(out, noise_scale, noise);
  const torch::Tensor y = impl_->decode(out);
  // Cut back to infer()'s shapes: the bucket's padding frames are masked zeros.
  const int64_t n = out.max_frames;
  out.y = y.narrow(2, 0, n);
  for (auto* t : {&out.z, &out.z_m, &out.z_logs, &out.z_mask, &out.attn}) *t = t->narrow(2, 0, n);
  return out;
#else
  (void)out, (void)noise_scale, (void)noise;
  throw UserError("graphed inference needs a CUDA build");
#endif
}

size_t GraphedInference::graphs() const {
#ifdef MONOFLOW_HAS_CUDA
  return impl_->decoders.entries.size();
#else
  return 0;
#endif
}

size_t GraphedInference::text_graphs() const {
#ifdef MONOFLOW_HAS_CUDA
  return impl_->texts.entries.size();
#else
  return 0;
#endif
}

size_t GraphedInference::prior_graphs() const {
#ifdef MONOFLOW_HAS_CUDA
  return impl_->priors.entries.size();
#else
  return 0;
#endif
}

}  // namespace monoflow::train
