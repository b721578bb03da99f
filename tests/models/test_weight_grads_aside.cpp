// Convolutions whose weight gradients run on a side stream (models/weight_grads_aside_cuda.h)
// against torch's own backward: the same input and weight gradients, bit for bit, through a
// chain of layers as the WaveNet and the text encoder have them, in float32 and bfloat16, eager
// and in a CUDA graph; and a whole model's training step with and without them. GPU only:
// skipped without one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#ifdef MONOFLOW_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model_test_util.h"
#include "models/autocast.h"
#include "models/glow_tts.h"
#include "models/losses.h"
#include "models/text_side_precision.h"
#include "models/weight_grads_aside_cuda.h"
#endif

namespace monoflow::models {
namespace {

#ifdef MONOFLOW_HAS_CUDA
// While alive: testing::ExactCuda's settings and a delay on the side stream before each weight
// gradient, so that a consumer reading one before its join reads it unfinished. All restored
// afterwards, with the aside setting.
class Deterministic {
 public:
  Deterministic() : aside_(cuda::weight_grads_aside()) { cuda::delay_weight_grads_for_tests(kDelayCycles); }
  ~Deterministic() {
    cuda::delay_weight_grads_for_tests(0);
    cuda::set_weight_grads_aside(aside_);
  }
  Deterministic(const Deterministic&) = delete;
  Deterministic& operator=(const Deterministic&) = delete;

 private:
  static constexpr int64_t kDelayCycles = 2'000'000;  // ~1 ms at the GPUs' clocks
  const testing::ExactCuda exact_;
  cuda::WeightGradsAside aside_;
};

constexpr int64_t kLayers = 4, kChannels = 48, kKernel = 5;

struct Chain {
  torch::Tensor x, r;
  std::vector<torch::Tensor> weights;  // leaves [C, C, 1, K] (ChannelsLast) or [C, C, K]
};

// Time rows ([B, C, 1, T] ChannelsLast, weights [C, C, 1, K]) as the decoder has them, or
// [B, C, T] with weights [C, C, K] as the text side has them.
Chain make_chain(torch::ScalarType dtype, int64_t batch, int64_t frames, bool time_rows) {
  torch::manual_seed(11);
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
  Chain c;
  if (time_rows) {
    c.x = torch::randn({batch, kChannels, 1, frames}, options).contiguous(torch::MemoryFormat::ChannelsLast);
  } else {
    c.x = torch::randn({batch, kChannels, frames}, options);
  }
  c.r = torch::randn(c.x.sizes(), options);
  for (int64_t i = 0; i < kLayers; ++i) {
    auto w = 0.1 * torch::randn({kChannels, kChannels, 1, kKernel}, options);
    w = time_rows ? w.contiguous(torch::MemoryFormat::ChannelsLast) : w.squeeze(2).contiguous();
    c.weights.push_back(w.requires_grad_());
  }
  c.x.requires_grad_();
  return c;
}

// Each layer's weight is the leaf times 2, a product whose backward reads the weight's gradient
// as the decoder's weight norm does; with `aside`, every weight is joined before the first
// layer, as the model's are. Layer i: a dilated convolution (dilation 2^i) and a tanh, as a WN
// layer's chain has one element-wise op between its convolutions. Returns the loss.
torch::Tensor chain_loss(const Chain& c, bool aside) {
  std::vector<torch::Tensor> weights;
  for (const auto& leaf : c.weights) weights.push_back(aside ? cuda::joined_weight(leaf * 2) : leaf * 2);
  auto h = c.x;
  for (int64_t i = 0; i < kLayers; ++i) {
    const int64_t dilation = int64_t{1} << i, padding = dilation * (kKernel - 1) / 2;
    if (aside) {
      h = cuda::conv_weight_grad_aside(h, weights[i], padding, dilation);
    } else if (h.dim() == 4) {
      const std::vector<int64_t> stride{1, 1}, pad{0, padding}, dil{1, dilation};
      h = torch::conv2d(h, weights[i], torch::Tensor(), stride, pad, dil);
    } else {
      h = torch::conv1d(h, weights[i], torch::Tensor(), /*stride=*/1, padding, dilation);
    }
    h = torch::tanh(h);
  }
  return (h.to(torch::kFloat) * c.r.to(torch::kFloat)).sum();
}

std::vector<torch::Tensor> gradients(const Chain& c) {
  std::vector<torch::Tensor> out{c.x.grad().clone()};
  for (const auto& w : c.weights) out.push_back(w.grad().clone());
  return out;
}

void zero_gradients(const Chain& c) {
  c.x.mutable_grad() = torch::Tensor();
  for (const auto& w : c.weights) w.mutable_grad() = torch::Tensor();
}

void expect_same_bits(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined()) << "gradient " << i;
    EXPECT_EQ(got[i].strides(), want[i].strides()) << "gradient " << i;
    EXPECT_TRUE(torch::equal(got[i], want[i])) << "gradient " << i << " (0: x, then the weights) differs by "
                                               << (got[i].to(torch::kDouble) - want[i].to(torch::kDouble))
                                                      .abs()
                                                      .max()
                                                      .item<double>();
    EXPECT_GT(want[i].abs().max().item<double>(), 0.0) << "gradient " << i << " is all zeros";
  }
}

class WeightGradsAsideCuda : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(WeightGradsAsideCuda, GiveTorchsGradientsThroughAChain) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Deterministic deterministic;
  for (const bool time_rows : {true, false}) {
    SCOPED_TRACE(time_rows ? "conv2d of time rows" : "conv1d");
    const auto c = make_chain(GetParam(), /*batch=*/3, /*frames=*/77, time_rows);
    chain_loss(c, /*aside=*/false).backward();
    const auto want = gradients(c);
    zero_gradients(c);
    chain_loss(c, /*aside=*/true).backward();
    expect_same_bits(gradients(c), want);
    // A second backward reuses what the first let go: still the same values.
    zero_gradients(c);
    chain_loss(c, /*aside=*/true).backward();
    expect_same_bits(gradients(c), want);
  }
}

// Forward and backward recorded into one graph on a stream of its own: the side stream joins
// the capture by its waits and rejoins before the capture ends (else capture_end throws).
TEST_P(WeightGradsAsideCuda, RecordIntoACudaGraphAndReplayTheSameGradients) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Deterministic deterministic;
  const auto c = make_chain(GetParam(), /*batch=*/2, /*frames=*/64, /*time_rows=*/true);
  chain_loss(c, /*aside=*/false).backward();
  const auto want = gradients(c);

  std::vector<torch::Tensor> grads;
  const auto step = [&] {
    zero_gradients(c);
    chain_loss(c, /*aside=*/true).backward();
    grads = {c.x.grad(), c.weights[0].grad(), c.weights[1].grad(), c.weights[2].grad(), c.weights[3].grad()};
  };
  auto stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, c.x.device().index());
  torch::cuda::synchronize();
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard on_stream(stream);
    step();  // warm-up: cuDNN's handles and plans outside the capture
    graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);  // as train/graph_capture.cpp
    step();
    graph.capture_end();
  }
  torch::cuda::synchronize();
  // The graph's own gradient tensors, zeroed, then filled by a replay.
  for (auto& g : grads) g.zero_();
  graph.replay();
  torch::cuda::synchronize();
  std::vector<torch::Tensor> got;
  for (const auto& g : grads) got.push_back(g.clone());
  expect_same_bits(got, want);
}

// A training step of a small model (both sides' convolutions, their joins where autograd puts
// them) with every weight gradient aside, with the decoder's only, and with none (before and
// after: the step itself is deterministic here): the same gradient for every parameter, bit for
// bit, in float32 and under bf16 autocast, there with the text side in float32 and in bf16
// (models/text_side_precision.h: its weights' joins then sit on views of one cast).
TEST_P(WeightGradsAsideCuda, LeaveAModelsTrainingStepUnchanged) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Deterministic deterministic;
  const bool bf16 = GetParam() == torch::kBFloat16;
  const TextSideAutocastScope restore_text_side(text_side_autocast());
  for (const bool text_side_bf16 : bf16 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
    SCOPED_TRACE(text_side_bf16 ? "text side in bf16" : "text side in float32");
    set_text_side_autocast(text_side_bf16);
    torch::manual_seed(5);
    const auto o = testing::tiny_options().p_dropout(0.0).p_dropout_dec(0.0);
    GlowTTS model(o);
    testing::randomize(*model);
    model->to(torch::kCUDA);
    model->train();
    const auto cuda = torch::TensorOptions().device(torch::kCUDA);
    const auto text = torch::randint(1, o.n_vocab(), {2, 9}, cuda.dtype(torch::kLong));
    const auto text_lengths = torch::tensor({9, 6}, cuda.dtype(torch::kLong));
    const auto mel = torch::randn({2, o.out_channels(), 40}, cuda);
    const auto mel_lengths = torch::tensor({40, 28}, cuda.dtype(torch::kLong));
    align::MasOptions mas;
    mas.backend = align::Backend::kCpu;

    std::vector<std::vector<torch::Tensor>> grads;
    std::vector<int64_t> forked;
    std::vector<std::string> names;
    // A first step whose gradients are not compared (cuDNN's and cuBLAS's set-up).
    for (const auto where : {cuda::WeightGradsAside::kNone, cuda::WeightGradsAside::kNone,
                             cuda::WeightGradsAside::kDecoder, cuda::WeightGradsAside::kAll,
                             cuda::WeightGradsAside::kNone}) {
      cuda::set_weight_grads_aside(where);
      const int64_t forks_before = cuda::weight_grads_forked();
      model->zero_grad();
      torch::manual_seed(6);  // the prenet's dropout (p = 0.5 whatever the options) draws the same masks
      torch::Tensor loss;
      {
        const Bf16Autocast autocast(bf16, torch::kCUDA);
        const auto out = model->forward(text, text_lengths, mel, mel_lengths, {}, mas);
        loss = mle_loss(out.z, out.z_m, out.z_logs, out.logdet, out.z_mask) +
               duration_loss(out.logw, out.logw_, text_lengths);
      }
      loss.backward();
      forked.push_back(cuda::weight_grads_forked() - forks_before);
      grads.emplace_back();
      names.clear();
      for (const auto& p : model->named_parameters()) {
        if (!p.value().grad().defined()) continue;
        names.push_back(p.key());
        grads.back().push_back(p.value().grad().clone());
      }
    }
    // None aside, the decoder's 2 x 2 dilated convolutions, then also the text side's 25
    // (prenet 3 + 1, encoder 2 x 6, proj_m, proj_s, duration predictor 3, ... as tiny_options has them).
    EXPECT_EQ(forked[0], 0);
    EXPECT_EQ(forked[1], 0);
    EXPECT_EQ(forked[2], o.n_blocks_dec() * o.n_block_layers());
    EXPECT_GT(forked[3], forked[2] + 10);
    EXPECT_EQ(forked[4], 0);
    ASSERT_GT(names.size(), 40u);
    for (size_t run = 2; run < grads.size(); ++run) {
      ASSERT_EQ(grads[run].size(), grads[1].size());
      for (size_t i = 0; i < names.size(); ++i) {
        SCOPED_TRACE(names[i] + ", run " + std::to_string(run));
        EXPECT_TRUE(torch::equal(grads[run][i], grads[1][i]));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, WeightGradsAsideCuda, ::testing::Values(torch::kFloat, torch::kBFloat16),
                         [](const ::testing::TestParamInfo<torch::ScalarType>& p) {
                           return std::string(c10::toString(p.param));
                         });
#endif

}  // namespace
}  // namespace monoflow::models
