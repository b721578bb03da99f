#include "train/graph_capture.h"

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace monoflow::train {

CudnnAlgorithms::CudnnAlgorithms(bool search)
    : benchmark_(at::globalContext().benchmarkCuDNN()), deterministic_(at::globalContext().deterministicCuDNN()) {
  at::globalContext().setBenchmarkCuDNN(search);
  if (!search) at::globalContext().setDeterministicCuDNN(true);
}

CudnnAlgorithms::~CudnnAlgorithms() {
  at::globalContext().setBenchmarkCuDNN(benchmark_);
  at::globalContext().setDeterministicCuDNN(deterministic_);
}

CapturePool::CapturePool(const torch::Device& device)
    : id(at::cuda::graph_pool_handle()), stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}

std::unique_ptr<at::cuda::CUDAGraph> record_graph(const CapturePool& pool, const std::function<void()>& warm_up,
                                                  const std::function<void()>& body, bool search) {
  const auto current = c10::cuda::getCurrentCUDAStream(pool.stream.device_index());
  const auto side = pool.stream;
  at::cuda::CUDAEvent inputs_ready;
  inputs_ready.record(current);
  inputs_ready.block(side);
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  const CudnnAlgorithms algorithms(search);
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    warm_up();
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);
    graph->capture_begin(pool.id, cudaStreamCaptureModeThreadLocal);
    try {
      body();
    } catch (...) {
      try {
        graph->capture_end();
      } catch (...) {
      }
      at::autocast::set_autocast_cache_enabled(cache);
      throw;
    }
    graph->capture_end();
    at::autocast::set_autocast_cache_enabled(cache);
  }
  at::cuda::CUDAEvent captured;
  captured.record(side);
  captured.block(current);
  // cuDNN's algorithm search may have tried workspaces as large as the free memory: hand the
  // cached blocks back to the device (the graph's own pool stays).
  if (search) c10::cuda::CUDACachingAllocator::emptyCache();
  return graph;
}

}  // namespace monoflow::train
#endif
