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
struct GraphedInference::Impl {
  // The decoder's inputs and output for one shape, and its graph.
  struct Entry {
    torch::Tensor z, z_mask, g, y;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    uint64_t last_used = 0;
  };
  using Shape = std::tuple<int64_t, int64_t, bool>;  // batch, padded frames, speakers

  models::GlowTTS model;
  size_t max_graphs;
  int eager_uses;
  std::map<Shape, int> eager_runs;  // shapes without a graph yet: how often each ran eagerly
  torch::Device device;
  c10::cuda::MempoolId_t pool;
  std::map<Shape, Entry> entries;
  uint64_t calls = 0;

  Impl(models::GlowTTS m, size_t max, int eager)
      : model(std::move(m)), max_graphs(max), eager_uses(eager),
        device(model->parameters().front().device()), pool(at::cuda::graph_pool_handle()) {}

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
    // The least recently used graph goes past max_graphs, after the capture (see graphed_step).
    if (entries.size() > max_graphs) {
      auto oldest = entries.end();
      for (auto i = entries.begin(); i != entries.end(); ++i) {
        if (&i->second != &e && (oldest == entries.end() || i->second.last_used < oldest->second.last_used)) oldest = i;
      }
      entries.erase(oldest);
    }
    return &e;
  }
};
#else
struct GraphedInference::Impl {};
#endif

GraphedInference::GraphedInference(models::GlowTTS model, int64_t frame_multiple, size_t max_graphs, int eager_uses)
    : frame_multiple_(frame_multiple) {
  const auto device = model->parameters().front().device();
  if (!supported(device)) throw UserError("graphed inference needs a CUDA device (got " + device.str() + ")");
  if (frame_multiple < 1 || frame_multiple % model->options().n_sqz() != 0 || max_graphs < 1 || eager_uses < 0) {
    throw UserError(
        "graphed inference: frame_multiple must be a positive multiple of n_sqz, max_graphs >= 1, eager_uses >= 0");
  }
#ifdef MONOFLOW_HAS_CUDA
  impl_ = std::make_unique<Impl>(std::move(model), max_graphs, eager_uses);
#endif
}

GraphedInference::~GraphedInference() = default;

models::InferenceOutput GraphedInference::infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                                const torch::Tensor& speakers, double noise_scale,
                                                double length_scale) {
#ifdef MONOFLOW_HAS_CUDA
  torch::NoGradGuard no_grad;
  const c10::cuda::CUDAGuard guard(impl_->device);
  return decode(impl_->model->infer_prior(text, text_lengths, speakers, noise_scale, length_scale, frame_multiple_));
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

size_t GraphedInference::graphs() const {
#ifdef MONOFLOW_HAS_CUDA
  return impl_->entries.size();
#else
  return 0;
#endif
}

}  // namespace monoflow::train
