#include "train/bucket_lengths.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>

#include "common/error.h"

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
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
namespace {

// The decoder's k-wide convolutions of one flow block at one length, forward and backward as
// the decoder runs them (ChannelsLast, the step's dtype, no bias: the gate adds it), recorded
// as a CUDA graph. Replays time the engines that cuDNN's benchmark chose for the shape, with
// no host work in between: timed eagerly, the host's launches and a noisy few repetitions
// kept the slow length in 3 of 18 processes (docs/benchmarks.md).
class BlockConvolutions {
 public:
  BlockConvolutions(const BucketLengthOptions& o, const torch::Device& device, int64_t batch, int64_t frames) {
    const auto on_device = torch::TensorOptions().device(device).dtype(o.dtype());
    const auto last = torch::MemoryFormat::ChannelsLast;
    x_ = torch::full({batch, o.channels(), 1, frames}, 0.01, on_device).contiguous(last);
    w_ = torch::full({2 * o.channels(), o.channels(), 1, o.kernel_size()}, 0.01, on_device).contiguous(last);
    grad_ = torch::full({batch, 2 * o.channels(), 1, frames}, 0.01, on_device).contiguous(last);
    for (int64_t i = 0, d = 1; i < o.n_block_layers(); ++i, d *= o.dilation_rate()) dilations_.push_back(d);
    kernel_size_ = o.kernel_size();
    // The warm-up runs cuDNN's benchmark search for the shape; the capture takes its choice.
    graph_ = record_graph(CapturePool(device), [&] { run(); }, [&] { run(); });
  }

  // Microseconds of one replay.
  double replay_us(const c10::cuda::CUDAStream& stream) {
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    start.record(stream);
    graph_->replay();
    stop.record(stream);
    stop.synchronize();
    return 1e3 * start.elapsed_time(stop);
  }

 private:
  void run() {
    for (const int64_t d : dilations_) {
      const std::vector<int64_t> stride{1, 1}, padding{0, (kernel_size_ - 1) * d / 2}, dilation{1, d};
      at::convolution(x_, w_, std::nullopt, stride, padding, dilation, false, {0, 0}, 1);
      at::convolution_backward(grad_, x_, w_, std::nullopt, stride, padding, dilation, false, {0, 0}, 1,
                               {true, true, false});
    }
  }

  torch::Tensor x_, w_, grad_;
  std::vector<int64_t> dilations_;
  int64_t kernel_size_ = 0;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
};

}  // namespace

std::vector<double> BucketLengths::conv_us(int64_t batch, const std::vector<int64_t>& frames) {
  std::vector<std::unique_ptr<BlockConvolutions>> blocks;
  {
    // record_graph turns benchmark mode on for the warm-up and the capture itself; kept on over
    // all the candidates' recordings as well.
    const CudnnAlgorithms search(true);
    for (const int64_t f : frames) blocks.push_back(std::make_unique<BlockConvolutions>(options_, device_, batch, f));
  }
  const auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
  for (auto& b : blocks) b->replay_us(stream);  // the first replay uploads the graph
  // Rounds over all candidates, the fastest replay of each: a transient slowdown of the
  // device then costs every candidate a round, not one candidate its figure.
  std::vector<double> fastest(frames.size(), std::numeric_limits<double>::infinity());
  for (int round = 0; round < options_.timed(); ++round) {
    for (size_t i = 0; i < blocks.size(); ++i) fastest[i] = std::min(fastest[i], blocks[i]->replay_us(stream));
  }
  for (double& us : fastest) us *= double(options_.n_blocks());
  return fastest;
}

int64_t BucketLengths::choose(int64_t batch, int64_t mel_frames) {
  if (!device_.is_cuda()) return mel_frames;
  const auto key = std::make_pair(batch, mel_frames);
  if (const auto it = chosen_.find(key); it != chosen_.end()) return it->second;
  std::vector<int64_t> frames;
  for (const int64_t extra : options_.extra_frames()) frames.push_back(mel_frames / options_.n_sqz() + extra);
  const int64_t chosen = frames[cheapest_length(frames, conv_us(batch, frames))] * options_.n_sqz();
  chosen_.emplace(key, chosen);
  return chosen;
}
#else
std::vector<double> BucketLengths::conv_us(int64_t, const std::vector<int64_t>& frames) {
  return std::vector<double>(frames.size(), 0.0);
}
int64_t BucketLengths::choose(int64_t, int64_t mel_frames) { return mel_frames; }
#endif

}  // namespace monoflow::train
