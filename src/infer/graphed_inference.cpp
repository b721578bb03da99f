#include "infer/graphed_inference.h"

#include <map>
#include <tuple>

#include "common/error.h"
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

// Past max_graphs the least recently used entry goes, all but `kept`, after the capture: a
// graph alive keeps the shared pool alive, which the capture needed (see graphed_step).
template <typename Map>
void drop_oldest(Map& entries, size_t max_graphs, const typename Map::mapped_type& kept) {
  if (entries.size() <= max_graphs) return;
  auto oldest = entries.end();
  for (auto i = entries.begin(); i != entries.end(); ++i) {
    if (&i->second != &kept && (oldest == entries.end() || i->second.last_used < oldest->second.last_used)) oldest = i;
  }
  entries.erase(oldest);
}

}  // namespace

struct GraphedInference::Impl {
  // The decoder's inputs and output for one shape, and its graph.
  struct Entry {
    torch::Tensor z, z_mask, g, y;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    uint64_t last_used = 0;
  };
  using Shape = std::tuple<int64_t, int64_t, bool>;  // batch, padded frames, speakers

  // The encoder and the durations for one text shape: inputs (text padded with zeros to a
  // multiple of kTextMultiple tokens, its lengths, g, the length scale) and outputs
  // (infer_durations, over the padded tokens), and its graph.
  struct TextEntry {
    torch::Tensor text, text_lengths, g, length_scale;
    models::InferenceOutput out;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    uint64_t last_used = 0;
  };
  using TextShape = std::tuple<int64_t, int64_t, bool>;  // batch, padded tokens, speakers
  static constexpr int64_t kTextMultiple = 16;

  models::GlowTTS model;
  size_t max_graphs;
  int eager_uses;
  bool graph_text;
  std::map<Shape, int> eager_runs;  // shapes without a graph yet: how often each ran eagerly
  std::map<TextShape, int> text_eager_runs;
  torch::Device device;
  // One memory pool per stage: a graph of one pool can reuse the temporaries of the others of its
  // pool, which replay in other calls, while the text graph's outputs must outlive the decoder's
  // replay in the same call (they are returned with its mel).
  c10::cuda::MempoolId_t pool, text_pool;
  std::map<Shape, Entry> entries;
  std::map<TextShape, TextEntry> text_entries;
  uint64_t calls = 0;

  Impl(models::GlowTTS m, size_t max, int eager, bool text)
      : model(std::move(m)), max_graphs(max), eager_uses(eager), graph_text(text),
        device(model->parameters().front().device()),
        pool(at::cuda::graph_pool_handle()),
        text_pool(at::cuda::graph_pool_handle()) {}

  void decode(Entry& e) { e.y = model->decoder->forward(e.z, e.z_mask, e.g, /*reverse=*/true).first; }

  // The graph's entry for the prior's shape, its inputs filled in; null while the shape still
  // runs eagerly (eager_uses).
  Entry* entry_for(const models::InferenceOutput& prior) {
    const Shape shape{prior.z.size(0), prior.z.size(2), prior.g.defined()};
    auto it = entries.find(shape);
    if (it != entries.end()) {
      it->second.z.copy_(prior.z);
      it->second.z_mask.copy_(prior.z_mask);
      if (prior.g.defined()) it->second.g.copy_(prior.g);
      return &it->second;
    }
    if (eager_runs[shape]++ < eager_uses) return nullptr;
    eager_runs.erase(shape);
    Entry& e = entries[shape];
    e.z = prior.z.clone();
    e.z_mask = prior.z_mask.clone();
    if (prior.g.defined()) e.g = prior.g.clone();
    try {
      e.graph = record_graph(device, pool, [&] { decode(e); }, [&] { decode(e); });
    } catch (...) {
      entries.erase(shape);
      throw;
    }
    drop_oldest(entries, max_graphs, e);
    return &e;
  }

  void encode(TextEntry& e) { e.out = model->infer_durations(e.text, e.text_lengths, e.g, e.length_scale); }

  // infer_lengths() with the encoder and the durations replayed from the text shape's graph
  // (eagerly while the shape has run fewer than eager_uses times).
  models::InferenceOutput lengths(const torch::Tensor& text_in, const torch::Tensor& text_lengths_in,
                                  const torch::Tensor& speakers, double length_scale) {
    const auto text = text_in.to(device);
    const auto text_lengths = text_lengths_in.to(device, torch::kLong);
    const auto g = model->speaker_vector(speakers, text.size(0));
    const int64_t b = text.size(0), t = text.size(1);
    const TextShape shape{b, (t + kTextMultiple - 1) / kTextMultiple * kTextMultiple, g.defined()};
    auto it = text_entries.find(shape);
    if (!graph_text || (it == text_entries.end() && text_eager_runs[shape]++ < eager_uses)) {
      return model->infer_lengths(text, text_lengths, speakers, length_scale);
    }
    TextEntry* e = it == text_entries.end() ? nullptr : &it->second;
    // Tokens past t keep an earlier text's: text_lengths masks them out of every valid
    // position (the encoder masks before each convolution and in attention), as the test's
    // shorter text after a longer one checks.
    const auto fill = [&](TextEntry& entry) {
      entry.text.narrow(1, 0, t).copy_(text);
      entry.text_lengths.copy_(text_lengths);
      if (g.defined()) entry.g.copy_(g);
      entry.length_scale.fill_(length_scale);
    };
    if (e == nullptr) {
      text_eager_runs.erase(shape);
      TextEntry& fresh = text_entries[shape];
      fresh.text = torch::zeros({b, std::get<1>(shape)}, text.options());
      fresh.text_lengths = text_lengths.clone();
      if (g.defined()) fresh.g = g.clone();
      fresh.length_scale = torch::zeros({}, text.options().dtype(torch::kFloat64));
      fill(fresh);
      try {
        fresh.graph = record_graph(device, text_pool, [&] { encode(fresh); }, [&] { encode(fresh); });
      } catch (...) {
        text_entries.erase(shape);
        throw;
      }
      drop_oldest(text_entries, max_graphs, fresh);
      e = &fresh;
    } else {
      fill(*e);
    }
    e->graph->replay();
    e->last_used = ++calls;
    // Cut back to the text's tokens: the padding tokens are masked, with no frames.
    models::InferenceOutput out = e->out;
    for (auto* x : {&out.w_ceil, &out.logw, &out.x_m, &out.x_logs, &out.x_mask}) *x = x->narrow(2, 0, t);
    out.max_frames = out.y_lengths.max().item<int64_t>();
    return out;
  }
};
#else
struct GraphedInference::Impl {};
#endif

GraphedInference::GraphedInference(models::GlowTTS model, int64_t frame_multiple, size_t max_graphs, int eager_uses,
                                   bool graph_text)
    : frame_multiple_(frame_multiple) {
  const auto device = model->parameters().front().device();
  if (!supported(device)) throw UserError("graphed inference needs a CUDA device (got " + device.str() + ")");
  if (frame_multiple < 1 || frame_multiple % model->options().n_sqz() != 0 || max_graphs < 1 || eager_uses < 0) {
    throw UserError(
        "graphed inference: frame_multiple must be a positive multiple of n_sqz, max_graphs >= 1, eager_uses >= 0");
  }
#ifdef MONOFLOW_HAS_CUDA
  impl_ = std::make_unique<Impl>(std::move(model), max_graphs, eager_uses, graph_text);
#endif
}

GraphedInference::~GraphedInference() = default;

models::InferenceOutput GraphedInference::infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                                const torch::Tensor& speakers, double noise_scale,
                                                double length_scale) {
#ifdef MONOFLOW_HAS_CUDA
  torch::NoGradGuard no_grad;
  const c10::cuda::CUDAGuard guard(impl_->device);
  models::InferenceOutput out = impl_->lengths(text, text_lengths, speakers, length_scale);
  impl_->model->infer_expand(out, noise_scale, frame_multiple_);
  return decode(std::move(out));
#else
  (void)text, (void)text_lengths, (void)speakers, (void)noise_scale, (void)length_scale;
  throw UserError("graphed inference needs a CUDA build");
#endif
}

models::InferenceOutput GraphedInference::decode(models::InferenceOutput out) {
#ifdef MONOFLOW_HAS_CUDA
  torch::NoGradGuard no_grad;
  const c10::cuda::CUDAGuard guard(impl_->device);
  TORCH_CHECK(out.z.size(2) % frame_multiple_ == 0, "GraphedInference::decode: the prior's frames (", out.z.size(2),
              ") must be padded to a multiple of ", frame_multiple_);
  torch::Tensor y;
  if (auto* e = impl_->entry_for(out)) {
    e->graph->replay();
    e->last_used = ++impl_->calls;
    y = e->y;
  } else {
    y = impl_->model->decoder->forward(out.z, out.z_mask, out.g, /*reverse=*/true).first;
  }
  // Cut back to infer()'s shapes: the bucket's padding frames are masked zeros.
  const int64_t n = out.max_frames;
  out.y = y.narrow(2, 0, n);
  for (auto* t : {&out.z, &out.z_m, &out.z_logs, &out.z_mask, &out.attn}) *t = t->narrow(2, 0, n);
  return out;
#else
  (void)out;
  throw UserError("graphed inference needs a CUDA build");
#endif
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

size_t GraphedInference::text_graphs() const {
#ifdef MONOFLOW_HAS_CUDA
  return impl_->text_entries.size();
#else
  return 0;
#endif
}

size_t GraphedInference::graphs() const {
#ifdef MONOFLOW_HAS_CUDA
  return impl_->entries.size();
#else
  return 0;
#endif
}

}  // namespace monoflow::train
