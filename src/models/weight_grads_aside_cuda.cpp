#include "models/weight_grads_aside_cuda.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace monoflow::models::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// A convolution's stride, padding and dilation over time: 1-D, or 2-D for time rows (height 1).
struct Spatial {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  Spatial(int64_t dims, int64_t pad, int64_t dil)
      : stride(dims, 1),
        padding(dims == 2 ? std::vector<int64_t>{0, pad} : std::vector<int64_t>{pad}),
        dilation(dims == 2 ? std::vector<int64_t>{1, dil} : std::vector<int64_t>{dil}),
        output_padding(dims, 0) {}
};

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> conv_backward(const torch::Tensor& grad,
                                                                       const torch::Tensor& x, const torch::Tensor& w,
                                                                       int64_t padding, int64_t dilation,
                                                                       std::array<bool, 3> mask) {
  const Spatial s(x.dim() - 2, padding, dilation);
  return at::convolution_backward(grad, x, w, /*bias_sizes=*/std::nullopt, s.stride, s.padding, s.dilation,
                                  /*transposed=*/false, s.output_padding, /*groups=*/1, mask);
}

std::atomic<WeightGradsAside>& aside_setting() {
  static std::atomic<WeightGradsAside> setting = [] {
    const char* value = std::getenv("MONOFLOW_WEIGHT_GRADS_ASIDE");
    const std::string text = value ? value : "";
    if (text == "0") return WeightGradsAside::kNone;
    return text == "decoder" ? WeightGradsAside::kDecoder : WeightGradsAside::kAll;
  }();
  return setting;
}

std::atomic<int64_t> forks{0}, delay_cycles{0};

// One device's side stream and the tensors its pending weight gradients read.
class SideStream {
 public:
  explicit SideStream(c10::DeviceIndex device) : device_(device), side_(create(device)) {}

  // `weight_grad()` run on the side stream after the current stream has reached this point;
  // the current stream first waits for the weight gradients forked before. `inputs`, what it
  // reads, are held until the join after it.
  torch::Tensor run(const std::function<torch::Tensor()>& weight_grad, std::array<torch::Tensor, 3> inputs) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto current = c10::cuda::getCurrentCUDAStream(device_);
    join_locked();
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(side_);
    torch::Tensor grad;
    {
      const c10::cuda::CUDAStreamGuard on_side(side_);
      if (const int64_t cycles = delay_cycles.load(); cycles > 0) at::cuda::sleep(cycles);
      grad = weight_grad();
    }
    held_.push_back({current, std::move(inputs)});
    ++forks;
    return grad;
  }

  // Every stream that handed tensors to pending work waits for the side stream; they are let go.
  void join() {
    const std::lock_guard<std::mutex> lock(mutex_);
    join_locked();
  }

 private:
  struct Held {
    c10::cuda::CUDAStream owner;
    std::array<torch::Tensor, 3> tensors;
  };

  static c10::cuda::CUDAStream create(c10::DeviceIndex device) {
    // A stream of its own (not the pool's, which other code may capture or run on), kept for
    // the process's life.
    const c10::cuda::CUDAGuard guard(device);
    cudaStream_t stream = nullptr;
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return c10::cuda::getStreamFromExternal(stream, device);
  }

  void join_locked() {
    if (held_.empty()) return;
    at::cuda::CUDAEvent done;
    done.record(side_);
    std::vector<c10::cuda::CUDAStream> waited;
    for (const auto& h : held_) {
      bool seen = false;
      for (const auto& s : waited) seen = seen || s == h.owner;
      if (seen) continue;
      done.block(h.owner);
      waited.push_back(h.owner);
    }
    held_.clear();
  }

  std::mutex mutex_;
  c10::DeviceIndex device_;
  c10::cuda::CUDAStream side_;
  std::vector<Held> held_;
};

SideStream& side_stream(const torch::Device& device) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<SideStream>> streams;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto index = static_cast<size_t>(device.index());
  if (streams.size() <= index) streams.resize(index + 1);
  if (!streams[index]) streams[index] = std::make_unique<SideStream>(device.index());
  return *streams[index];
}

struct ConvWeightGradAside : public torch::autograd::Function<ConvWeightGradAside> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w, int64_t padding,
                               int64_t dilation) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    const Spatial s(x.dim() - 2, padding, dilation);
    return at::convolution(x, w, /*bias=*/{}, s.stride, s.padding, s.dilation, /*transposed=*/false,
                           s.output_padding, /*groups=*/1);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const int64_t padding = ctx->saved_data["padding"].toInt(), dilation = ctx->saved_data["dilation"].toInt();
    const auto& grad = grads[0];
    torch::Tensor grad_x, grad_w;
    if (ctx->needs_input_grad(0)) {
      grad_x = std::get<0>(conv_backward(grad, x, w, padding, dilation, {true, false, false}));
    }
    if (ctx->needs_input_grad(1)) {
      const auto weight_grad = [&] {
        return std::get<1>(conv_backward(grad, x, w, padding, dilation, {false, true, false}));
      };
      grad_w = side_stream(grad.device()).run(weight_grad, {grad, x, w});
    }
    return {grad_x, grad_w, {}, {}};
  }
};

struct JoinedWeight : public torch::autograd::Function<JoinedWeight> {
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& w) { return w; }
  static tensor_list backward(AutogradContext*, tensor_list grads) {
    side_stream(grads[0].device()).join();  // (grads are materialised: defined)
    return {grads[0]};
  }
};

}  // namespace

void set_weight_grads_aside(WeightGradsAside where) { aside_setting() = where; }
WeightGradsAside weight_grads_aside() { return aside_setting(); }
bool weight_grads_aside_in_decoder() { return aside_setting() != WeightGradsAside::kNone; }
bool weight_grads_aside_in_text_side() { return aside_setting() == WeightGradsAside::kAll; }

torch::Tensor conv_weight_grad_aside(const torch::Tensor& x, const torch::Tensor& w, int64_t padding,
                                     int64_t dilation) {
  TORCH_CHECK(x.is_cuda() && w.device() == x.device() && w.scalar_type() == x.scalar_type() &&
                  (x.dim() == 3 || (x.dim() == 4 && x.size(2) == 1)) && w.dim() == x.dim(),
              "conv_weight_grad_aside: x [B, C, T] or [B, C, 1, T] and w of one dtype on one CUDA device");
  return ConvWeightGradAside::apply(x, w, padding, dilation);
}

torch::Tensor joined_weight(const torch::Tensor& w) { return JoinedWeight::apply(w); }

int64_t weight_grads_forked() { return forks.load(); }
void delay_weight_grads_for_tests(int64_t cycles) { delay_cycles = cycles; }

}  // namespace monoflow::models::cuda
