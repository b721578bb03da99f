// The decoder's batched weight norm (models/weight_norm_cuda.h) against torch::_weight_norm:
// values in float32 and under the autocast dtypes, the layout the convolutions read, and the
// gradients of v and g; then a training step of the decoder with and without it. GPU only.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model_test_util.h"
#include "models/decoder.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/weight_norm_cuda.h"
#endif

namespace monoflow::models {
namespace {

#ifdef MONOFLOW_HAS_CUDA
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

TEST(WeightNormCuda, BatchedEqualsWeightNormPerConvolutionWithGradients) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(7);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  // more than one launch's worth (32), shapes of the decoder and odd ones
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < 12; ++i) {
    shapes.push_back({384, 192, 5});
    shapes.push_back({384, 192, 1});
    shapes.push_back({192, 80, 1});
  }
  shapes.push_back({7, 3, 3});
  shapes.push_back({33, 40, 1});
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    std::vector<torch::Tensor> vs, gs, vs_ref, gs_ref;
    for (const auto& shape : shapes) {
      vs.push_back(torch::randn(shape, f32).requires_grad_(true));
      gs.push_back((torch::rand({shape[0], 1, 1}, f32) + 0.5).requires_grad_(true));
      vs_ref.push_back(vs.back().detach().clone().requires_grad_(true));
      gs_ref.push_back(gs.back().detach().clone().requires_grad_(true));
    }
    const auto ws = cuda::batched_weight_norm(vs, gs, dtype);
    ASSERT_EQ(ws.size(), shapes.size());
    std::vector<torch::Tensor> refs, grads;
    for (size_t i = 0; i < shapes.size(); ++i) {
      refs.push_back(torch::_weight_norm(vs_ref[i], gs_ref[i], 0).to(dtype));
      grads.push_back(torch::randn(shapes[i], f32).to(dtype));
      EXPECT_EQ(ws[i].scalar_type(), dtype);
      EXPECT_EQ(ws[i].sizes(), refs[i].sizes());
      if (shapes[i][2] > 1) {
        EXPECT_TRUE(ws[i].unsqueeze(2).is_contiguous(torch::MemoryFormat::ChannelsLast)) << i;
      } else {
        EXPECT_TRUE(ws[i].is_contiguous()) << i;
      }
      // float: a few ulp of |w| ~ 1; 16-bit types: the same rounding of nearly the same float
      const double tol = dtype == torch::kFloat ? 1e-5 : dtype == torch::kBFloat16 ? 1.6e-2 : 2e-3;
      EXPECT_LE(max_abs_diff(ws[i], refs[i]), tol * refs[i].abs().max().item<double>()) << i;
    }
    torch::autograd::backward(ws, grads);
    torch::autograd::backward(refs, grads);
    for (size_t i = 0; i < shapes.size(); ++i) {
      const double scale_v = vs_ref[i].grad().abs().max().item<double>();
      const double scale_g = gs_ref[i].grad().abs().max().item<double>();
      EXPECT_LE(max_abs_diff(vs[i].grad(), vs_ref[i].grad()), 1e-4 * scale_v) << "v " << i;
      EXPECT_LE(max_abs_diff(gs[i].grad(), gs_ref[i].grad()), 1e-4 * scale_g) << "g " << i;
    }
  }
}

// The decoder on the GPU (batched weight norm, fused kernels) against the same decoder on the
// CPU (torch::_weight_norm per convolution): every parameter gets a gradient, and the same one.
TEST(WeightNormCuda, DecoderGradientsOnTheGpuEqualTheCpus) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  torch::manual_seed(8);
  auto o = testing::tiny_options().p_dropout_dec(0.0);
  FlowSpecDecoder cpu(o), gpu(o);
  {
    torch::NoGradGuard no_grad;
    auto from = cpu->named_parameters(), to = gpu->named_parameters();
    for (const auto& p : from) {
      p.value().add_(torch::randn_like(p.value()) * 0.1);  // past the zero-initialised identity
      to[p.key()].copy_(p.value());
    }
  }
  gpu->to(torch::kCUDA);
  auto x = torch::randn({2, o.out_channels(), 24});
  auto mask = torch::ones({2, 1, 24});
  mask[1].slice(1, 16).zero_();
  auto loss_of = [&](FlowSpecDecoder& dec, const torch::Device& device) {
    auto [z, logdet] = dec->forward(x.to(device), mask.to(device));
    return (z * z).sum() - logdet.sum();
  };
  loss_of(cpu, torch::kCPU).backward();
  loss_of(gpu, torch::kCUDA).backward();
  auto to = gpu->named_parameters();
  int weight_normed = 0;
  for (const auto& p : cpu->named_parameters()) {
    SCOPED_TRACE(p.key());
    const auto& g_gpu = to[p.key()].grad();
    ASSERT_TRUE(p.value().grad().defined());
    ASSERT_TRUE(g_gpu.defined());
    const double scale = std::max(1e-3, p.value().grad().abs().max().item<double>());
    EXPECT_LE(max_abs_diff(g_gpu, p.value().grad()), 1e-3 * scale);
    weight_normed += p.key().find("weight_v") != std::string::npos;
  }
  EXPECT_GT(weight_normed, 0);
  at::globalContext().setAllowTF32CuDNN(true);
  at::globalContext().setAllowTF32CuBLAS(true);
}

TEST(WeightNormCuda, RefusesWhatItCannotTake) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  auto v = torch::randn({4, 3, 5}, f32), g = torch::rand({4, 1, 1}, f32);
  EXPECT_TRUE(cuda::batched_weight_norm_applies({v}, {g}, torch::kBFloat16));
  EXPECT_FALSE(cuda::batched_weight_norm_applies({v.cpu()}, {g.cpu()}, torch::kFloat));
  EXPECT_FALSE(cuda::batched_weight_norm_applies({v.to(torch::kDouble)}, {g}, torch::kFloat));
  EXPECT_FALSE(cuda::batched_weight_norm_applies({v.transpose(1, 2)}, {g}, torch::kFloat));
  EXPECT_FALSE(cuda::batched_weight_norm_applies({v}, {g}, torch::kDouble));
  EXPECT_FALSE(cuda::batched_weight_norm_applies({}, {}, torch::kFloat));
}
#endif

}  // namespace
}  // namespace monoflow::models
