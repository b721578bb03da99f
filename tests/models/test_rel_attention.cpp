// The text encoder's relative-position attention (models/attentions.h): the fused CUDA path
// against the composite of the official ops, forward and backward, with and without dropout
// (GPU tests skip without a device); the CPU dispatch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Context.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/attentions.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/rel_attention_cuda.h"
#endif

namespace monoflow::models {
namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kDouble) - b.cpu().to(torch::kDouble)).abs().max().item<double>();
}

// One attention call's inputs: q, k, v [b, h, l, d] as the module passes them (views of
// [b, h*d, l] activations, transposed), the relative embeddings of a window of 4 and the
// [b, 1, l, l] mask of items whose last is shorter by a third (padded rows and columns).
struct AttentionInput {
  int64_t b, h, l, d;
  torch::Tensor q, k, v, emb_k, emb_v, mask;

  static AttentionInput make(int64_t b, int64_t h, int64_t l, int64_t d, torch::Device device) {
    const auto on = torch::TensorOptions().device(device);
    const auto heads = [&] { return torch::randn({b, h * d, l}, on).view({b, h, d, l}).transpose(2, 3); };
    std::vector<int64_t> lengths(b, l);
    lengths.back() = std::max<int64_t>(1, l - l / 3);
    const auto x_mask = (torch::arange(l).unsqueeze(0) < torch::tensor(lengths).unsqueeze(1)).to(torch::kFloat).to(device);
    return {b, h, l, d, heads(), heads(), heads(), torch::randn({1, 9, d}, on) * 0.5, torch::randn({1, 9, d}, on) * 0.5,
            (x_mask.unsqueeze(1).unsqueeze(3) * x_mask.unsqueeze(1).unsqueeze(2))};
  }
  std::string name() const { return "b" + std::to_string(b) + " l" + std::to_string(l) + " d" + std::to_string(d); }
};

// The five differentiable inputs, fresh leaves.
std::vector<torch::Tensor> leaves(const AttentionInput& in) {
  std::vector<torch::Tensor> out;
  for (const auto* t : {&in.q, &in.k, &in.v, &in.emb_k, &in.emb_v}) out.push_back(t->detach().clone().requires_grad_(true));
  return out;
}

// Forward, then backward with `grad`: the output and the five inputs' gradients.
template <typename F>
std::vector<torch::Tensor> run(const AttentionInput& in, const torch::Tensor& grad, F&& attention) {
  auto x = leaves(in);
  const auto out = attention(x[0], x[1], x[2], x[3], x[4]);
  out.backward(grad);
  std::vector<torch::Tensor> result{out.detach()};
  for (const auto& t : x) result.push_back(t.grad());
  return result;
}

// Each result within `tolerance` of the reference, relative to the reference's largest value.
void expect_close(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want, double tolerance) {
  const char* names[] = {"output", "grad q", "grad k", "grad v", "grad emb_k", "grad emb_v"};
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const double scale = std::max(1.0, want[i].abs().max().item<double>());
    EXPECT_LE(max_abs_diff(got[i], want[i]), tolerance * scale);
  }
}

#ifdef MONOFLOW_HAS_CUDA
bool cuda_applies(const AttentionInput& in) {
  return cuda::fused_relative_attention_applies(in.q, in.k, in.v, in.emb_k, in.emb_v, in.mask);
}
#else
bool cuda_applies(const AttentionInput&) { return false; }
#endif

// TF32 off for the products of both paths, so that they compare in float32.
class RelativeAttentionCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    tf32_ = at::globalContext().allowTF32CuBLAS();
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  void TearDown() override {
    if (torch::cuda::is_available()) at::globalContext().setAllowTF32CuBLAS(tf32_);
  }
  bool tf32_ = false;
};

TEST(RelativeAttention, CpuRunsTheComposite) {
  torch::manual_seed(3);
  const auto in = AttentionInput::make(2, 2, 7, 4, torch::kCPU);
  const auto grad = torch::randn({2, 2, 7, 4});
  const auto got = run(in, grad, [&](auto... x) { return relative_attention(x..., in.mask, 0.0); });
  const auto want =
      run(in, grad, [&](auto... x) { return attention_reference(x..., in.mask, /*block_length=*/0, 0.0); });
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(torch::equal(got[i], want[i])) << i;
}

TEST_F(RelativeAttentionCuda, MatchesTheCompositeForwardAndBackward) {
  torch::manual_seed(5);
  // Lengths below, at and above the window's reach (w + 1 = 5), and an encoder-sized batch.
  for (const auto& in : {AttentionInput::make(3, 2, 1, 8, torch::kCUDA), AttentionInput::make(3, 2, 4, 8, torch::kCUDA),
                         AttentionInput::make(3, 2, 37, 16, torch::kCUDA),
                         AttentionInput::make(32, 2, 184, 96, torch::kCUDA)}) {
    SCOPED_TRACE(in.name());
    const auto grad = torch::randn({in.b, in.h, in.l, in.d}, torch::kCUDA);
    torch::Tensor fused_out;
    const auto got = run(in, grad, [&](auto... x) { return fused_out = relative_attention(x..., in.mask, 0.0); });
    ASSERT_NE(fused_out.grad_fn()->name().find("RelativeAttention"), std::string::npos) << fused_out.grad_fn()->name();
    const auto want = run(in, grad, [&](auto... x) { return attention_reference(x..., in.mask, 0, 0.0); });
    expect_close(got, want, 1e-5);
    // Padded query rows attend uniformly, as the composite's masked_fill makes them.
    EXPECT_TRUE(torch::isfinite(got[0]).all().item<bool>());
  }
}

// With dropout the kernel draws its own mask. A one-hot value matrix makes the output the
// dropped weights themselves, which reveal the mask; the same seed draws it again for random
// values, and the composite with that mask must then agree forward and backward.
TEST_F(RelativeAttentionCuda, DropoutDrawsAMaskThatBackwardReuses) {
  const double p = 0.25;
  const int64_t l = 37;
  torch::manual_seed(11);
  auto in = AttentionInput::make(4, 2, l, 48, torch::kCUDA);
  const auto one_hot = torch::eye(l, in.d, torch::kCUDA).expand({in.b, in.h, l, in.d});
  const auto zero_emb = torch::zeros_like(in.emb_v);
  const auto weights = relative_attention(in.q, in.k, one_hot, in.emb_k, zero_emb, in.mask, 0.0).slice(3, 0, l);
  torch::manual_seed(77);
  const auto dropped = relative_attention(in.q, in.k, one_hot, in.emb_k, zero_emb, in.mask, p).slice(3, 0, l);
  const auto keep_mask = (dropped != 0).to(torch::kFloat);

  // Kept weights are scaled by 1 / (1 - p); about p of them are dropped.
  const auto kept = keep_mask.to(torch::kBool);
  EXPECT_LE(max_abs_diff(dropped.masked_select(kept), weights.masked_select(kept) / (1 - p)), 1e-6);
  const auto attended = weights > 0;  // masked keys have weight 0, dropped or not
  const double dropped_share =
      1.0 - (kept & attended).sum().item<double>() / attended.sum().item<double>();
  EXPECT_GT(dropped_share, p - 0.03);
  EXPECT_LT(dropped_share, p + 0.03);

  const auto grad = torch::randn({in.b, in.h, l, in.d}, torch::kCUDA);
  torch::manual_seed(77);
  const auto got = run(in, grad, [&](auto... x) { return relative_attention(x..., in.mask, p); });
  const auto want = run(in, grad, [&](auto... x) { return attention_reference(x..., in.mask, 0, p, keep_mask); });
  expect_close(got, want, 1e-5);
}

// The text side under bf16 autocast (models/text_side_precision.h): q, k, v and the embeddings in
// bf16, the products' outputs, the softmax rows and every gradient in bf16, the arithmetic in
// float. Against the float32 composite on the same (bf16-representable) values: within bf16's
// rounding of the scores, weights and outputs; the gradients in bf16 as the leaves are.
TEST_F(RelativeAttentionCuda, Bf16RowsMatchTheFloatCompositeWithinBf16Rounding) {
  torch::manual_seed(13);
  for (const auto& in32 : {AttentionInput::make(3, 2, 37, 16, torch::kCUDA), AttentionInput::make(8, 2, 184, 96, torch::kCUDA)}) {
    SCOPED_TRACE(in32.name());
    AttentionInput in = in32;
    for (auto* t : {&in.q, &in.k, &in.v, &in.emb_k, &in.emb_v}) *t = t->to(torch::kBFloat16);
    ASSERT_TRUE(cuda_applies(in));
    const auto grad = torch::randn({in.b, in.h, in.l, in.d}, torch::kCUDA).to(torch::kBFloat16);
    torch::Tensor fused_out;
    const auto got = run(in, grad, [&](auto... x) { return fused_out = relative_attention(x..., in.mask, 0.0); });
    ASSERT_NE(fused_out.grad_fn()->name().find("RelativeAttention"), std::string::npos) << fused_out.grad_fn()->name();
    for (const auto& t : got) EXPECT_EQ(t.scalar_type(), torch::kBFloat16);
    AttentionInput as_float = in;
    for (auto* t : {&as_float.q, &as_float.k, &as_float.v, &as_float.emb_k, &as_float.emb_v}) *t = t->to(torch::kFloat);
    const auto want = run(as_float, grad.to(torch::kFloat),
                          [&](auto... x) { return attention_reference(x..., in.mask, 0, 0.0); });
    // bf16 keeps 8 significant bits (a relative step of 2^-8 = 0.4%); the scores' rounding moves
    // the weights by about that much again.
    expect_close(got, want, 3e-2);
  }
}

}  // namespace
}  // namespace monoflow::models
