// Recording a CUDA graph the way every graphed path here needs it (CUDA builds only):
//   - on a side stream that first waits for the current one, which waits for the capture;
//   - `warm_up` runs once on that stream before capture, so that cuDNN/cuBLAS set up their
//     handles and workspaces outside the graph;
//   - cuDNN's benchmark mode is on for the warm-up and the capture: a graph's shapes are fixed,
//     so the warm-up times cuDNN's algorithms once per convolution shape and the capture takes
//     the fastest from that cache (timing inside a capture would be illegal; with the mode off,
//     cuDNN's heuristics pick). Restored afterwards: eager steps of ever new shapes keep the
//     heuristics, which cost nothing per shape;
//   - autocast's cast cache is off while recording (cached casts would outlive the capture);
//   - thread-local capture mode: other threads (the data loader's) may allocate meanwhile.
// Used by GraphedTrainStep (train/graphed_step.h) and GraphedInference (infer/graphed_inference.h).
#pragma once

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <torch/torch.h>

#include <functional>
#include <memory>

namespace monoflow::train {

// cuDNN's benchmark mode set for a scope and restored on leaving it, exceptions included.
class CudnnBenchmarkMode {
 public:
  explicit CudnnBenchmarkMode(bool on);
  ~CudnnBenchmarkMode();
  CudnnBenchmarkMode(const CudnnBenchmarkMode&) = delete;
  CudnnBenchmarkMode& operator=(const CudnnBenchmarkMode&) = delete;

 private:
  bool previous_;
};

std::unique_ptr<at::cuda::CUDAGraph> record_graph(const torch::Device& device, c10::cuda::MempoolId_t pool,
                                                  const std::function<void()>& warm_up,
                                                  const std::function<void()>& body);

}  // namespace monoflow::train
#endif
