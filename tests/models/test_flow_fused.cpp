// The decoder flows' fused ops (models/flow_fused.h): CUDA kernels against the composite
// references, forward and backward (GPU tests skip without a device); the CPU dispatch.
#include <gtest/gtest.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/flow_fused.h"
#include "models/flow_reverse_cpu.h"
#include "models/flow_train_cpu.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/flow_fused_cuda.h"
#endif

namespace monoflow::models {
namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

torch::Tensor mask_of(const std::vector<int64_t>& lengths, int64_t t) {
  return (torch::arange(t).unsqueeze(0) < torch::tensor(lengths).unsqueeze(1)).to(torch::kFloat).unsqueeze(1);
}

// A flow's test input on the GPU: x, an upstream gradient and a mask whose first item is half
// padding.
struct FlowInput {
  int64_t b, c, t;
  torch::Tensor x, grad, mask;
  std::string name() const { return std::to_string(b) + "x" + std::to_string(c) + "x" + std::to_string(t); }
};
FlowInput flow_input(int64_t b, int64_t c, int64_t t) {
  std::vector<int64_t> lengths(b, t);
  lengths[0] = t / 2;
  return {b, c, t, torch::randn({b, c, t}, torch::kCUDA), torch::randn({b, c, t}, torch::kCUDA),
          mask_of(lengths, t).to(torch::kCUDA)};
}

TEST(FlowFused, CpuActNormIsTheAffineMap) {
  auto x = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({1, 2, 2});
  auto logs = torch::tensor({0.0f, std::log(2.0f)}).view({1, 2, 1});
  auto bias = torch::tensor({1.0f, -1.0f}).view({1, 2, 1});
  auto mask = torch::tensor({1.0f, 0.0f}).view({1, 1, 2});
  EXPECT_TRUE(torch::allclose(actnorm_affine(x, logs, bias, mask), torch::tensor({2.0f, 0.0f, 5.0f, 0.0f}).view({1, 2, 2})));
}

TEST(FlowFusedCuda, ActNormMatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(9);
  for (const FlowInput& s : {flow_input(32, 160, 256), flow_input(3, 5, 37)}) {
    SCOPED_TRACE("shape " + s.name());
    const auto &x = s.x, &grad = s.grad, &mask = s.mask;
    auto logs = torch::randn({1, s.c, 1}, torch::kCUDA) * 0.3;
    auto bias = torch::randn({1, s.c, 1}, torch::kCUDA);
    std::vector<torch::Tensor> ref{x.clone().requires_grad_(true), logs.clone().requires_grad_(true),
                                   bias.clone().requires_grad_(true)};
    std::vector<torch::Tensor> fused{x.clone().requires_grad_(true), logs.clone().requires_grad_(true),
                                     bias.clone().requires_grad_(true)};
    auto y_ref = actnorm_affine_reference(ref[0], ref[1], ref[2], mask);
    auto y = actnorm_affine(fused[0], fused[1], fused[2], mask);
    EXPECT_LE(max_abs_diff(y, y_ref), 1e-5);
    EXPECT_EQ(y.slice(2, s.t / 2)[0].abs().sum().item<double>(), 0.0);  // padding stays zero
    y_ref.backward(grad);
    y.backward(grad);
    const char* names[] = {"x", "logs", "bias"};
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(names[k]);
      // Parameter gradients sum B * T values: relative to their size.
      const double scale = std::max(1.0, ref[k].grad().abs().max().item<double>());
      EXPECT_LE(max_abs_diff(fused[k].grad(), ref[k].grad()), 1e-5 * scale);
    }
  }
}

TEST(FlowFused, CpuInvConvMixesGroupsOfFour) {
  // Channels (0, 1 | 4, 5) form group 0 and (2, 3 | 6, 7) group 1: swapping the first two of
  // each group's four swaps channels 0 <-> 1 and 2 <-> 3.
  auto x = torch::arange(8, torch::kFloat).view({1, 8, 1});
  auto swap = torch::zeros({4, 4});
  swap[0][1] = swap[1][0] = swap[2][2] = swap[3][3] = 1.0f;
  auto z = invconv_mix(x, swap, torch::ones({1, 1, 1}));
  EXPECT_TRUE(torch::equal(z.flatten(), torch::tensor({1.0f, 0.0f, 3.0f, 2.0f, 4.0f, 5.0f, 6.0f, 7.0f})));
}

// CPU inference (no gradient recorded) takes flow_reverse_cpu.h's one-pass kernels, called here
// by name; a batch whose second item is padded from frame 23 on, 37 frames (not a multiple of
// the 8 lanes).
struct CpuFlowInput {
  torch::Tensor x, mask;
};
CpuFlowInput cpu_flow_input(int64_t c) {
  torch::manual_seed(7);
  return {torch::randn({2, c, 37}), mask_of({37, 23}, 37)};
}

TEST(FlowFused, CpuInferenceActNormReverseEqualsTheReferenceToTheBit) {
  const auto in = cpu_flow_input(12);
  const auto logs = torch::randn({1, 12, 1}) * 0.5, bias = torch::randn({1, 12, 1});
  torch::NoGradGuard no_grad;
  ASSERT_TRUE(cpu::flow_reverse_applies(in.x, in.mask));
  const auto fused = cpu::actnorm_reverse(in.x, logs, bias, in.mask);
  EXPECT_TRUE(torch::equal(fused, actnorm_reverse_reference(in.x, logs, bias, in.mask)));
  // and it undoes the forward map on the frames the mask keeps
  const auto back = actnorm_reverse(actnorm_affine(in.x, logs, bias, in.mask), logs, bias, in.mask);
  EXPECT_LT(max_abs_diff(back, in.x * in.mask), 1e-5);
  EXPECT_EQ(fused.slice(2, 23).select(0, 1).abs().max().item<float>(), 0.0f);
}

TEST(FlowFused, CpuInferenceInvConvEqualsTheReferenceForGroupsOfFourAndEight) {
  for (const int64_t n : {4, 8}) {
    const auto in = cpu_flow_input(16);
    const auto w = torch::randn({n, n});
    torch::NoGradGuard no_grad;
    const auto fused = cpu::invconv_mix(in.x, w, in.mask);
    const auto reference = invconv_mix_reference(in.x, w, in.mask);
    EXPECT_LT(max_abs_diff(fused, reference), 1e-5 * reference.abs().max().item<double>()) << "n = " << n;
    EXPECT_EQ(fused.slice(2, 23).select(0, 1).abs().max().item<float>(), 0.0f) << "n = " << n;
    // the inverse weight's mixing undoes it
    const auto back = cpu::invconv_mix(fused, torch::inverse(w.to(torch::kDouble)).to(torch::kFloat), in.mask);
    EXPECT_LT(max_abs_diff(back, in.x * in.mask), 1e-4) << "n = " << n;
  }
}

TEST(FlowFused, CpuInferenceCouplingReverseEqualsTheReferenceAndUndoesTheForward) {
  const auto in = cpu_flow_input(10);
  const auto out = torch::randn({2, 10, 37}), bias = torch::randn({10}) * 0.3;
  torch::NoGradGuard no_grad;
  const auto m_and_logs = out + bias.view({1, -1, 1});
  const auto fused = cpu::coupling_reverse(in.x, m_and_logs, in.mask);
  const auto reference = coupling_reverse_reference(in.x, m_and_logs, in.mask);
  EXPECT_TRUE(torch::equal(fused.slice(1, 0, 5), in.x.slice(1, 0, 5)));  // x_0 passes through
  EXPECT_LT(max_abs_diff(fused, reference), 1e-6 * reference.abs().max().item<double>());
  const auto z = coupling_affine(in.x, out, bias, in.mask).first;
  const auto back = cpu::coupling_reverse(z, m_and_logs, in.mask);
  EXPECT_LT(max_abs_diff(back.slice(1, 5), (in.x * in.mask).slice(1, 5)), 1e-5);
}

TEST(FlowFused, CpuKernelsServeInferenceOnlyAndGradientsStillFlowThroughTheReverseOps) {
  const auto in = cpu_flow_input(8);
  EXPECT_FALSE(cpu::flow_reverse_applies(in.x, in.mask));  // autograd on: the references
  EXPECT_FALSE(cpu::flow_reverse_applies(in.x.to(torch::kDouble), in.mask));
  auto logs = (torch::randn({1, 8, 1}) * 0.5).requires_grad_();
  actnorm_reverse(in.x, logs, torch::zeros({1, 8, 1}), in.mask).sum().backward();
  EXPECT_GT(logs.grad().abs().sum().item<float>(), 0.0f);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(cpu::flow_reverse_applies(in.x, in.mask));
  EXPECT_FALSE(cpu::flow_reverse_applies(in.x, in.mask.squeeze(1)));
}

// CPU training: InvConvNear's mixing as one autograd op (flow_train_cpu.h) against the
// composite reference (permuted copies and a conv2d), forward and both gradients, for the
// official n = 4 (AVX2 where the CPU has it) and n = 8 (scalar), 37 frames (not a multiple of
// eight) with padding in the second item.
TEST(FlowFused, CpuTrainingInvConvEqualsTheReferenceWithItsGradients) {
  for (const int64_t n : {4, 8}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto in = cpu_flow_input(16);
    const auto grad = torch::randn({2, 16, 37});
    const auto w0 = std::get<0>(torch::linalg_qr(torch::randn({n, n}))).contiguous();
    auto x_ref = in.x.clone().requires_grad_(), x_op = in.x.clone().requires_grad_();
    auto w_ref = w0.clone().requires_grad_(), w_op = w0.clone().requires_grad_();
    ASSERT_TRUE(cpu::invconv_train_applies(x_op, w_op, in.mask));
    const auto reference = invconv_mix_reference(x_ref, w_ref, in.mask);
    const auto fused = invconv_mix(x_op, w_op, in.mask);  // the dispatch takes the CPU training op
    EXPECT_LT(max_abs_diff(fused, reference), 1e-6 * reference.abs().max().item<double>());
    EXPECT_EQ(fused.slice(2, 23).select(0, 1).abs().max().item<float>(), 0.0f);
    reference.backward(grad);
    fused.backward(grad);
    EXPECT_LT(max_abs_diff(x_op.grad(), x_ref.grad()), 1e-6 * x_ref.grad().abs().max().item<double>());
    EXPECT_EQ(x_op.grad().slice(2, 23).select(0, 1).abs().max().item<float>(), 0.0f);  // padding: no gradient
    EXPECT_LT(max_abs_diff(w_op.grad(), w_ref.grad()), 1e-5 * w_ref.grad().abs().max().item<double>());
    EXPECT_GT(w_op.grad().abs().min().item<float>(), 0.0f);
  }
}

// The weight's gradient sums its terms in an order that no thread count changes (4,099 frames:
// a task per item and group, so that the threads do split the work).
TEST(FlowFused, CpuTrainingInvConvWeightGradientIsTheSameForAnyThreadCount) {
  torch::manual_seed(3);
  const CpuFlowInput in{torch::randn({2, 160, 4099}), mask_of({4099, 3000}, 4099)};
  const auto grad = torch::randn({2, 160, 4099});
  const auto w0 = std::get<0>(torch::linalg_qr(torch::randn({4, 4}))).contiguous();
  const int threads = at::get_num_threads();
  std::vector<torch::Tensor> grads;
  for (const int count : {1, 2, 3}) {
    at::set_num_threads(count);
    auto w = w0.clone().requires_grad_();
    invconv_mix(in.x, w, in.mask).backward(grad);
    grads.push_back(w.grad());
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  EXPECT_TRUE(torch::equal(grads[0], grads[2]));
}

// CPU training: ActNorm's forward map as one autograd op (flow_train_cpu.h) against the
// reference: the same bits forward, the gradients of x, logs and bias within float rounding
// (37 frames, padding in the second item); logs' and bias's gradients the same at any thread
// count, and the dispatch takes the op only while autograd records.
TEST(FlowFused, CpuTrainingActNormEqualsTheReferenceWithItsGradients) {
  const auto in = cpu_flow_input(16);
  const auto logs0 = torch::randn({1, 16, 1}) * 0.3, bias0 = torch::randn({1, 16, 1});
  const auto grad = torch::randn({2, 16, 37});
  auto x_ref = in.x.clone().requires_grad_(), x_op = in.x.clone().requires_grad_();
  auto logs_ref = logs0.clone().requires_grad_(), logs_op = logs0.clone().requires_grad_();
  auto bias_ref = bias0.clone().requires_grad_(), bias_op = bias0.clone().requires_grad_();
  ASSERT_TRUE(cpu::actnorm_train_applies(x_op, logs_op, bias_op, in.mask));
  const auto reference = actnorm_affine_reference(x_ref, logs_ref, bias_ref, in.mask);
  const auto fused = actnorm_affine(x_op, logs_op, bias_op, in.mask);  // the dispatch takes the op
  EXPECT_TRUE(torch::equal(fused, reference));
  reference.backward(grad);
  fused.backward(grad);
  EXPECT_LT(max_abs_diff(x_op.grad(), x_ref.grad()), 1e-6 * x_ref.grad().abs().max().item<double>());
  EXPECT_EQ(x_op.grad().slice(2, 23).select(0, 1).abs().max().item<float>(), 0.0f);  // padding: no gradient
  EXPECT_LT(max_abs_diff(logs_op.grad(), logs_ref.grad()), 1e-5 * logs_ref.grad().abs().max().item<double>());
  EXPECT_LT(max_abs_diff(bias_op.grad(), bias_ref.grad()), 1e-5 * bias_ref.grad().abs().max().item<double>());
  EXPECT_GT(bias_op.grad().abs().min().item<float>(), 0.0f);
  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(cpu::actnorm_train_applies(in.x, logs0, bias0, in.mask));
  }
  const auto x_long = torch::randn({3, 16, 4099}), grad_long = torch::randn({3, 16, 4099});
  const auto mask_long = mask_of({4099, 3000, 17}, 4099);
  const int threads = at::get_num_threads();
  std::vector<torch::Tensor> grads;
  for (const int count : {1, 2, 3}) {
    at::set_num_threads(count);
    auto logs = logs0.clone().requires_grad_(), bias = bias0.clone().requires_grad_();
    cpu::actnorm_affine_train(x_long, logs, bias, mask_long).backward(grad_long);
    grads.push_back(torch::cat({logs.grad(), bias.grad()}));
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  EXPECT_TRUE(torch::equal(grads[0], grads[2]));
}

// CPU training: the coupling's affine transform as one autograd op (flow_train_cpu.h) against
// the composite reference with m_and_logs carrying the bias, forward (z and the log-determinant)
// and the gradients of x and m_and_logs, through both outputs; 37 frames (an AVX2 tail),
// padding in the second item. The log-determinant's sums are the same at any thread count.
TEST(FlowFused, CpuTrainingCouplingEqualsTheReferenceWithItsGradients) {
  const auto in = cpu_flow_input(10);
  const auto ml0 = torch::randn({2, 10, 37}) * 0.5;
  const auto grad_z = torch::randn({2, 10, 37}), grad_det = torch::randn({2});
  auto x_ref = in.x.clone().requires_grad_(), x_op = in.x.clone().requires_grad_();
  auto ml_ref = ml0.clone().requires_grad_(), ml_op = ml0.clone().requires_grad_();
  ASSERT_TRUE(cpu::coupling_train_applies(x_op, ml_op, in.mask));
  const auto [z_ref, det_ref] = coupling_affine_reference(x_ref, ml_ref, torch::zeros({10}), in.mask);
  const auto [z_op, det_op] = cpu::coupling_affine_train(x_op, ml_op, in.mask);
  EXPECT_TRUE(torch::equal(z_op.slice(1, 0, 5), in.x.slice(1, 0, 5)));  // x_0 passes through
  EXPECT_LT(max_abs_diff(z_op, z_ref), 1e-6 * z_ref.abs().max().item<double>());
  EXPECT_LT(max_abs_diff(det_op, det_ref), 1e-5 * det_ref.abs().max().item<double>());
  EXPECT_EQ(z_op.slice(2, 23).select(0, 1).slice(0, 5).abs().max().item<float>(), 0.0f);
  torch::autograd::backward({z_ref, det_ref}, {grad_z, grad_det});
  torch::autograd::backward({z_op, det_op}, {grad_z, grad_det});
  EXPECT_LT(max_abs_diff(x_op.grad(), x_ref.grad()), 1e-6 * x_ref.grad().abs().max().item<double>());
  EXPECT_LT(max_abs_diff(ml_op.grad(), ml_ref.grad()), 1e-6 * ml_ref.grad().abs().max().item<double>());
  // the log-determinant's gradient reaches logs, and only where the mask is on
  EXPECT_EQ(ml_op.grad().slice(2, 23).select(0, 1).abs().max().item<float>(), 0.0f);
  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(cpu::coupling_train_applies(in.x, ml0, in.mask));  // inference keeps its own path
  }
  // 4,099 frames: two rows a task, so that the threads do split the rows.
  const auto x_long = torch::randn({2, 10, 4099}), ml_long = torch::randn({2, 10, 4099});
  const auto mask_long = mask_of({4099, 3000}, 4099);
  const int threads = at::get_num_threads();
  std::vector<torch::Tensor> dets;
  for (const int count : {1, 2, 3}) {
    at::set_num_threads(count);
    dets.push_back(cpu::coupling_affine_train(x_long, ml_long, mask_long).second.detach());
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(dets[0], dets[1]));
  EXPECT_TRUE(torch::equal(dets[0], dets[2]));
}

TEST(FlowFusedCuda, InvConvMatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  at::globalContext().setAllowTF32CuDNN(false);
  torch::manual_seed(10);
  for (const FlowInput& s : {flow_input(32, 160, 256), flow_input(3, 8, 37)}) {
    SCOPED_TRACE("shape " + s.name());
    const auto &x = s.x, &grad = s.grad, &mask = s.mask;
    auto w = torch::randn({4, 4}, torch::kCUDA);
    auto x_ref = x.clone().requires_grad_(true), w_ref = w.clone().requires_grad_(true);
    auto x_fused = x.clone().requires_grad_(true), w_fused = w.clone().requires_grad_(true);
    auto z_ref = invconv_mix_reference(x_ref, w_ref, mask);
    auto z = invconv_mix(x_fused, w_fused, mask);
    EXPECT_LE(max_abs_diff(z, z_ref), 1e-4);
    z_ref.backward(grad);
    z.backward(grad);
    EXPECT_LE(max_abs_diff(x_fused.grad(), x_ref.grad()), 1e-4);
    const double scale = std::max(1.0, w_ref.grad().abs().max().item<double>());
    EXPECT_LE(max_abs_diff(w_fused.grad(), w_ref.grad()), 1e-5 * scale);
  }
  at::globalContext().setAllowTF32CuDNN(true);
}

TEST(FlowFusedCuda, CouplingAffineMatchesTheReferenceForwardAndBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(11);
  struct Case {
    int64_t b, c, t;
    torch::ScalarType out_dtype;
  };
  for (const Case k : {Case{32, 160, 256, torch::kFloat}, Case{3, 10, 37, torch::kFloat},
                       Case{4, 160, 100, torch::kBFloat16}}) {
    SCOPED_TRACE("shape " + std::to_string(k.b) + "x" + std::to_string(k.c) + "x" + std::to_string(k.t) + " " +
                 c10::toString(k.out_dtype));
    std::vector<int64_t> lengths(k.b, k.t);
    lengths[0] = k.t / 2;
    auto mask = mask_of(lengths, k.t).to(torch::kCUDA);
    auto x = torch::randn({k.b, k.c, k.t}, torch::kCUDA);
    // The end convolution's output, channels-last as the coupling network leaves it.
    auto out = (torch::randn({k.b, k.t, k.c}, torch::kCUDA) * 0.5).to(k.out_dtype).transpose(1, 2);
    auto bias = torch::randn({k.c}, torch::kCUDA) * 0.1;
    auto gz = torch::randn({k.b, k.c, k.t}, torch::kCUDA), gl = torch::randn({k.b}, torch::kCUDA);
    std::vector<torch::Tensor> ref, fused;
    for (auto* v : {&ref, &fused}) {
      v->push_back(x.clone().requires_grad_(true));
      v->push_back(out.detach().clone(torch::MemoryFormat::Preserve).requires_grad_(true));
      v->push_back(bias.clone().requires_grad_(true));
    }
    auto [z_ref, ld_ref] = coupling_affine_reference(ref[0], ref[1].to(torch::kFloat), ref[2], mask);
    auto [z, ld] = coupling_affine(fused[0], fused[1], fused[2], mask);
    EXPECT_LE(max_abs_diff(z, z_ref), 1e-5);
    EXPECT_LE(max_abs_diff(ld, ld_ref), 1e-3 * std::max(1.0, ld_ref.abs().max().item<double>()));
    torch::autograd::backward({z_ref, ld_ref}, {gz, gl});
    torch::autograd::backward({z, ld}, {gz, gl});
    const double out_tolerance = k.out_dtype == torch::kFloat ? 1e-5 : 1e-2;
    EXPECT_LE(max_abs_diff(fused[0].grad(), ref[0].grad()), 1e-5);
    EXPECT_EQ(fused[1].grad().scalar_type(), k.out_dtype);
    EXPECT_LE(max_abs_diff(fused[1].grad(), ref[1].grad()),
              out_tolerance * std::max(1.0, ref[1].grad().abs().max().item<double>()));
    EXPECT_LE(max_abs_diff(fused[2].grad(), ref[2].grad()),
              (k.out_dtype == torch::kFloat ? 1e-4 : 5e-2) * std::max(1.0, ref[2].grad().abs().max().item<double>()));
  }
}


#ifdef MONOFLOW_HAS_CUDA
// The coupling's input op: x_0's rows for the network and x for the fused transform, whose
// gradients meet in place; against split, a copy to rows and the reference transform. Also
// with only one of its outputs used (the other's gradient undefined).
TEST(FlowFusedCuda, CouplingInputGivesTheGradientOfSplitAndTransform) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(12);
  // 40 channels a half: a full and a partial 32-channel tile, as the decoder's 80 has.
  const int64_t b = 3, c = 80, t = 37, half = c / 2;
  auto mask = mask_of({t, 20, 31}, t).to(torch::kCUDA);
  auto x = torch::randn({b, c, t}, torch::kCUDA);
  auto out = (torch::randn({b, t, c}, torch::kCUDA) * 0.5).transpose(1, 2);
  auto bias = torch::randn({c}, torch::kCUDA) * 0.1;
  auto w_rows = torch::randn({b, half, 1, t}, torch::kCUDA), gz = torch::randn({b, c, t}, torch::kCUDA);
  ASSERT_TRUE(cuda::fused_coupling_input_applies(x, mask));
  EXPECT_FALSE(cuda::fused_coupling_input_applies(x.transpose(1, 2).contiguous().transpose(1, 2), mask));
  EXPECT_FALSE(cuda::fused_coupling_input_applies(x.narrow(1, 0, 9).contiguous(), mask));
  // The rows in float, and in bfloat16 as autocast has them (the cast in the layout copy).
  for (const auto rows_dtype : {torch::kFloat, torch::kBFloat16})
  for (const int uses : {3, 1, 2}) {  // bit 1: the rows, bit 2: the transform
    SCOPED_TRACE("uses " + std::to_string(uses) + ", rows " + std::string(c10::toString(rows_dtype)));
    auto x_ref = x.clone().requires_grad_(true), x_op = x.clone().requires_grad_(true);
    auto loss_of = [&](const torch::Tensor& rows, const torch::Tensor& whole) {
      auto loss = torch::zeros({}, torch::kCUDA);
      if (uses & 1) loss = loss + (rows * w_rows).sum();
      if (uses & 2) loss = loss + (coupling_affine(whole, out, bias, mask).first * gz).sum();
      return loss;
    };
    const auto rows_ref =
        x_ref.split(half, 1)[0].unsqueeze(2).contiguous(torch::MemoryFormat::ChannelsLast).to(rows_dtype);
    loss_of(rows_ref, x_ref).backward();
    const auto [rows_op, whole_op] = cuda::coupling_input(x_op, rows_dtype);
    EXPECT_TRUE(rows_op.is_contiguous(torch::MemoryFormat::ChannelsLast));
    EXPECT_EQ(rows_op.scalar_type(), rows_dtype);
    EXPECT_TRUE(torch::equal(rows_op, rows_ref));
    EXPECT_TRUE(torch::equal(whole_op, x));
    loss_of(rows_op, whole_op).backward();
    EXPECT_LE(max_abs_diff(x_op.grad(), x_ref.grad()), 1e-6);
    EXPECT_GT(x_ref.grad().narrow(1, 0, half).abs().max().item<double>(), 0.1);
  }
}
#endif  // MONOFLOW_HAS_CUDA

}  // namespace
}  // namespace monoflow::models
