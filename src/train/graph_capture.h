// Recording a CUDA graph the way every graphed path here needs it (CUDA builds only):
//   - into a CapturePool's memory pool, on its side stream, which first waits for the current
//     one, which waits for the capture;
//   - `warm_up` runs once on that stream before capture, so that cuDNN/cuBLAS set up their
//     handles and workspaces outside the graph;
//   - cuDNN picks its convolution algorithms for the warm-up and the capture either by timing
//     them (`search`, benchmark mode: a graph's shapes are fixed, so the warm-up times each
//     convolution shape once and the capture takes the fastest from PyTorch's plan cache; timing
//     inside a capture would be illegal) or by its heuristics (cudnn_search.h says when which).
//     Restored afterwards: eager steps of ever new shapes keep the heuristics;
//   - autocast's cast cache is off while recording (cached casts would outlive the capture);
//   - thread-local capture mode: other threads (the data loader's) may allocate meanwhile.
// Used by GraphedTrainStep (train/graphed_step.h) and GraphedInference (infer/graphed_inference.h).
#pragma once

#include <cstdint>

namespace monoflow::train {

// `n` rounded up to a multiple of `multiple`: the padded length of a graph's shape bucket (also
// without CUDA: bench_train_step's eager-padded mode pads so).
inline int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace monoflow::train

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <functional>
#include <memory>

namespace monoflow::train {

// How cuDNN picks convolution algorithms in a scope, restored on leaving it (exceptions
// included): `search` turns benchmark mode on; otherwise it is off and cuDNN's deterministic
// algorithms are asked for. PyTorch caches a plan per convolution shape and serves it before
// any search; its key holds the deterministic flag, so plans the heuristics chose here never
// stand in for a search of the same shape later.
class CudnnAlgorithms {
 public:
  explicit CudnnAlgorithms(bool search);
  ~CudnnAlgorithms();
  CudnnAlgorithms(const CudnnAlgorithms&) = delete;
  CudnnAlgorithms& operator=(const CudnnAlgorithms&) = delete;

 private:
  bool benchmark_, deterministic_;
};

// Graphs that share a memory pool, and the one stream they are all recorded on. The caching
// allocator hands a free block only to an allocation on the stream it was made on, so graphs
// recorded on streams of their own would each hold their own memory in the shared pool (11
// aligner-config graphs held 18.5 GiB on an H100 that way, the eager steps 0.9 GiB), and so
// would the warm-ups' cached blocks outside it.
struct CapturePool {
  c10::cuda::MempoolId_t id;
  c10::cuda::CUDAStream stream;
  explicit CapturePool(const torch::Device& device);
};

// On the pool's stream, on that stream's device.
std::unique_ptr<at::cuda::CUDAGraph> record_graph(const CapturePool& pool, const std::function<void()>& warm_up,
                                                  const std::function<void()>& body, bool search = true);

// Past max_graphs, erases the least recently used entry (by `last_used`) of a map of graph
// entries, other than `kept`. Called after a capture: the graphs alive keep the shared pool
// alive, which the capture needed. Returns the erased entry's address, to compare with
// pointers the caller holds (null: none erased).
template <typename Map>
const void* drop_oldest(Map& entries, size_t max_graphs, const typename Map::mapped_type& kept) {
  if (entries.size() <= max_graphs) return nullptr;
  auto oldest = entries.end();
  for (auto i = entries.begin(); i != entries.end(); ++i) {
    if (&i->second != &kept && (oldest == entries.end() || i->second.last_used < oldest->second.last_used)) oldest = i;
  }
  const void* erased = &oldest->second;
  entries.erase(oldest);
  return erased;
}

}  // namespace monoflow::train
#endif
