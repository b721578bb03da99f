#include "train/bucket_lengths.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include "train/graph_capture.h"
#endif

namespace monoflow::train {

size_t cheapest_length(const std::vector<int64_t>& frames, const std::vector<double>& conv_us, double rest_per_conv) {
  if (frames.empty() || frames.size() != conv_us.size()) {
    throw UserError("cheapest_length: one measured time per candidate length, at least one");
  }
  double per_frame = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < frames.size(); ++i) per_frame = std::min(per_frame, conv_us[i] / double(frames[i]));
  size_t best = 0;
  double best_cost = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < frames.size(); ++i) {
    const double cost = conv_us[i] + rest_per_conv * per_frame * double(frames[i] - frames[0]);
    if (cost < best_cost) {
      best = i;
      best_cost = cost;
    }
  }
  return best;
}

BucketLengths::BucketLengths(BucketLengthOptions options, torch::Device device)
    : options_(std::move(options)), device_(device) {
  if (options_.extra_frames().empty() || options_.extra_frames().front() != 0 || options_.timed() < 1 ||
      options_.n_sqz() < 1) {
    throw UserError("bucket lengths: the candidates start at 0 extra frames; timed and n_sqz >= 1");
  }
}

#ifdef MONOFLOW_HAS_CUDA
double BucketLengths::conv_us(int64_t batch, int64_t frames) {
  const auto& o = options_;
  const auto on_device = torch::TensorOptions().device(device_).dtype(o.dtype());
  const auto last = torch::MemoryFormat::ChannelsLast;
  // The decoder's layout: [B, C, 1, T] rows in ChannelsLast, weights [2C, C, 1, k] likewise.
  const torch::Tensor x = torch::full({batch, o.channels(), 1, frames}, 0.01, on_device).contiguous(last);
  const torch::Tensor w = torch::full({2 * o.channels(), o.channels(), 1, o.kernel_size()}, 0.01, on_device).contiguous(last);
  const torch::Tensor bias = torch::zeros({2 * o.channels()}, on_device);
  const torch::Tensor grad = torch::full({batch, 2 * o.channels(), 1, frames}, 0.01, on_device).contiguous(last);
  std::map<int64_t, int64_t> layers_per_dilation;
  for (int64_t i = 0, d = 1; i < o.n_block_layers(); ++i, d *= o.dilation_rate()) ++layers_per_dilation[d];

  const auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
  double total = 0;
  for (const auto& [d, layers] : layers_per_dilation) {
    const std::vector<int64_t> stride{1, 1}, padding{0, (o.kernel_size() - 1) * d / 2}, dilation{1, d};
    const auto once = [&] {
      at::convolution(x, w, bias, stride, padding, dilation, false, {0, 0}, 1);
      at::convolution_backward(grad, x, w, bias.sizes(), stride, padding, dilation, false, {0, 0}, 1,
                               {true, true, true});
    };
    once();  // cuDNN's benchmark mode picks its engines on a shape's first call
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    start.record(stream);
    for (int i = 0; i < o.timed(); ++i) once();
    stop.record(stream);
    stop.synchronize();
    total += 1e3 * start.elapsed_time(stop) / o.timed() * double(layers);
  }
  return total * double(o.n_blocks());
}

int64_t BucketLengths::choose(int64_t batch, int64_t mel_frames) {
  if (!device_.is_cuda()) return mel_frames;
  const auto key = std::make_pair(batch, mel_frames);
  if (const auto it = chosen_.find(key); it != chosen_.end()) return it->second;
  // The graph records with cuDNN's benchmark mode on (graph_capture.h): time the engines it uses.
  std::vector<int64_t> frames;
  std::vector<double> times;
  {
    const CudnnBenchmarkMode benchmark(true);
    for (const int64_t extra : options_.extra_frames()) {
      frames.push_back(mel_frames / options_.n_sqz() + extra);
      times.push_back(conv_us(batch, frames.back()));
    }
  }
  const int64_t chosen = frames[cheapest_length(frames, times)] * options_.n_sqz();
  chosen_.emplace(key, chosen);
  return chosen;
}
#else
double BucketLengths::conv_us(int64_t, int64_t) { return 0; }
int64_t BucketLengths::choose(int64_t, int64_t mel_frames) { return mel_frames; }
#endif

}  // namespace monoflow::train
