// The dev/cuda harnesses' shared pieces: a CUDA call check that exits with status 2, the device
// check, a comma list option, the largest relative error, device buffers and their copy to the host,
// and the time of a kernel sequence as the training step runs it, `repeats` calls captured in
// one CUDA graph, so that the host's launch rate (~2-3 us a launch) does not set the figure.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                                              \
  do {                                                                                           \
    const cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

// Whether a CUDA device is there (the harnesses exit 77 without one: ctest's skip).
inline bool has_cuda_device() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

// "384,192,160" -> {384, 192, 160} (a list option's value).
inline std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// Largest |got - want| / max(1, |want|) over the elements; NaN where any got is NaN.
template <typename T, typename U>
double max_rel_error(const std::vector<T>& got, const std::vector<U>& want) {
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = static_cast<double>(want[i]);
    const double e = std::fabs(static_cast<double>(got[i]) - w) / std::max(1.0, std::fabs(w));
    if (std::isnan(e)) return e;  // std::max would drop it
    worst = std::max(worst, e);
  }
  return worst;
}

// A device buffer of n elements of T (at least one), and one holding v's elements.
template <typename T>
T* device(int64_t n) {
  T* p;
  CHECK(cudaMalloc(&p, sizeof(T) * std::max<int64_t>(n, 1)));
  return p;
}
template <typename T>
T* device_copy(const std::vector<T>& v) {
  T* p = device<T>(static_cast<int64_t>(v.size()));
  CHECK(cudaMemcpy(p, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice));
  return p;
}

// The n elements of T at device pointer p, on the host.
template <typename T>
std::vector<T> host_copy(const T* p, int64_t n) {
  std::vector<T> out(n);
  CHECK(cudaMemcpy(out.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
  return out;
}

// Microseconds a call of run(stream), after one warm-up replay of the graph.
template <typename F>
double graph_us(int repeats, F&& run) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < repeats; ++r) run(stream);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
  return 1000.0 * ms / repeats;
}
