#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"
#include "train/fused_adam.h"

namespace monoflow::train {
namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    a = register_module("a", torch::nn::Linear(6, 8));
    b = register_module("b", torch::nn::Conv1d(torch::nn::Conv1dOptions(8, 4, 3).padding(1)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return b->forward(torch::tanh(a->forward(x)).transpose(1, 2)); }
  torch::nn::Linear a{nullptr};
  torch::nn::Conv1d b{nullptr};
};
TORCH_MODULE(Net);

torch::optim::AdamOptions options() { return torch::optim::AdamOptions(3e-2).betas({0.9, 0.98}).eps(1e-9); }

void step(Net& net, torch::optim::Optimizer& opt, int seed) {
  torch::manual_seed(seed);
  const auto x = torch::randn({3, 5, 6});
  opt.zero_grad();
  net->forward(x).pow(2).mean().backward();
  opt.step();
}

Net copy_of(Net& a) {
  Net b;
  b->to(a->parameters().front().device());
  torch::NoGradGuard g;
  for (size_t i = 0; i < a->parameters().size(); ++i) b->parameters()[i].copy_(a->parameters()[i]);
  return b;
}

void save(const FusedAdam& opt, const std::string& path) {
  torch::serialize::OutputArchive archive;
  opt.save(archive);
  archive.save_to(path);
}

void load(FusedAdam& opt, const std::string& path) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  opt.load(archive);
}

// The fused kernel implements torch::optim::Adam's rule: after 20 steps the weights agree to
// float32 rounding (the kernel orders a few multiplications differently).
TEST(FusedAdam, MatchesTorchAdam) {
  torch::manual_seed(0);
  Net a, b;
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < a->parameters().size(); ++i) b->parameters()[i].copy_(a->parameters()[i]);
  }
  torch::optim::Adam reference(a->parameters(), options());
  FusedAdam fused(b->parameters(), options());
  for (int i = 0; i < 20; ++i) {
    step(a, reference, 100 + i);
    step(b, fused, 100 + i);
  }
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::allclose(a->parameters()[i], b->parameters()[i], 1e-5, 1e-6)) << i;
  }
  auto& s = static_cast<torch::optim::AdamParamState&>(*fused.state().begin()->second);
  EXPECT_EQ(s.step(), 20);
}

// Saving after 5 steps and loading into a fresh optimizer continues bit-identically.
TEST(FusedAdam, SaveLoadContinuesExactly) {
  testing::TempDir dir;
  torch::manual_seed(1);
  Net a;
  FusedAdam opt_a(a->parameters(), options());
  for (int i = 0; i < 5; ++i) step(a, opt_a, i);
  save(opt_a, dir / "opt.pt");
  Net b = copy_of(a);
  FusedAdam opt_b(b->parameters(), options());
  load(opt_b, dir / "opt.pt");
  for (int i = 5; i < 10; ++i) {
    step(a, opt_a, i);
    step(b, opt_b, i);
  }
  for (size_t i = 0; i < a->parameters().size(); ++i) EXPECT_TRUE(torch::equal(a->parameters()[i], b->parameters()[i])) << i;
}

std::vector<torch::Tensor> trained(Net& net) {
  std::vector<torch::Tensor> params;
  for (const auto& p : net->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

// The graphed step's layout: every gradient of a trained parameter a view of one flat buffer.
// Here in the reverse of the group's order, which flatten() must follow.
torch::Tensor flat_gradients(Net& net) {
  auto params = trained(net);
  int64_t numel = 0;
  for (const auto& p : params) numel += p.numel();
  torch::Tensor flat = torch::zeros({numel}, params.front().options());
  int64_t offset = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    it->mutable_grad() = flat.narrow(0, offset, it->numel()).view_as(*it);
    offset += it->numel();
  }
  return flat;
}

// Gradients into the flat views, as GraphedTrainStep writes them (no zero_grad: it would drop
// the views).
void flat_step(Net& net, FusedAdam& opt, int seed, const torch::Tensor& found_inf = {}) {
  const auto device = net->parameters().front().device();
  torch::manual_seed(seed);
  const auto x = torch::randn({3, 5, 6}).to(device);
  const auto params = trained(net);
  const auto grads = torch::autograd::grad({net->forward(x).pow(2).mean()}, params);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) params[i].grad().copy_(grads[i]);
  if (found_inf.defined()) {
    opt.step_on_device(torch::full({}, 3e-2f, torch::TensorOptions().device(device)), found_inf.to(device));
  } else {
    opt.step();
  }
}

Net seeded_net(uint64_t seed, const torch::Device& device) {
  torch::manual_seed(seed);
  Net net;
  net->to(device);
  return net;
}

// Two copies of one net, each with its gradients in a flat buffer, the optimizers' state made:
// `a` updated per parameter, `b` by the flattened optimizer.
struct FlatPair {
  FlatPair(uint64_t seed, const torch::Device& device)
      : a(seeded_net(seed, device)), b(copy_of(a)), per_param(a->parameters(), options()),
        flat(b->parameters(), options()) {
    flat_gradients(a);
    grads = flat_gradients(b);
    per_param.init_state();
    flat.init_state();
  }
  Net a, b;
  FusedAdam per_param, flat;
  torch::Tensor grads;
};

// The same steps (eager and device ones, step 4 skipped) with per-parameter moments and with
// flat buffers; returns the largest difference of the weights and checks what flatten() kept.
float flat_against_per_parameter(const torch::Device& device) {
  FlatPair pair(2, device);
  auto& [a, b, per_param, flat, grads] = pair;
  const auto before = b->parameters();
  EXPECT_TRUE(flat.flatten(grads));
  EXPECT_TRUE(flat.flat());
  const auto after = b->parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].unsafeGetTensorImpl(), before[i].unsafeGetTensorImpl()) << i;  // the same tensors
    EXPECT_TRUE(after[i].is_alias_of(after.front())) << i;                            // in one buffer
    EXPECT_TRUE(after[i].grad().is_alias_of(grads)) << i;
  }
  for (int i = 0; i < 3; ++i) {
    flat_step(a, per_param, 10 + i);
    flat_step(b, flat, 10 + i);
  }
  for (int i = 3; i < 6; ++i) {
    const auto inf = torch::full({}, i == 4 ? 1.0f : 0.0f);
    flat_step(a, per_param, 10 + i, inf);
    flat_step(b, flat, 10 + i, inf);
  }
  flat_step(a, per_param, 20);
  flat_step(b, flat, 20);
  per_param.sync_steps_from_device();
  flat.sync_steps_from_device();
  for (const auto& [key, s] : flat.state()) EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*s).step(), 6);
  float diff = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    diff = std::max(diff, (a->parameters()[i] - after[i]).abs().max().item<float>());
  }
  return diff;
}

// On the CPU the kernel's vectorised body and scalar tail fall on other elements when the
// tensors are longer, and may round an update differently by an ulp (weights ~0.5 here).
TEST(FusedAdam, FlatBuffersUpdateAsPerParameter) {
  EXPECT_LE(flat_against_per_parameter(torch::kCPU), 3e-8);
}

// The CUDA kernel's arithmetic does not depend on where an element lies: bit for bit, which is
// what keeps the graphed step (flat) equal to the eager one (per parameter).
TEST(FusedAdamCuda, FlatBuffersUpdateExactlyAsPerParameter) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  EXPECT_EQ(flat_against_per_parameter(torch::Device(torch::kCUDA, 0)), 0.0f);
}

// A parameter without a gradient (frozen) stays out of the flat buffers and untouched, as
// per-parameter updates leave it; the others still update in one kernel.
TEST(FusedAdam, AFrozenParameterStaysOutOfTheFlatBuffers) {
  torch::manual_seed(6);
  Net a;
  Net b = copy_of(a);
  a->a->bias.requires_grad_(false);
  b->a->bias.requires_grad_(false);
  const torch::Tensor frozen = b->a->bias.clone();
  FusedAdam per_param(a->parameters(), options());
  FusedAdam flat(b->parameters(), options());
  flat_gradients(a);
  const torch::Tensor grads = flat_gradients(b);
  per_param.init_state();
  flat.init_state();
  ASSERT_TRUE(flat.flatten(grads));
  for (int i = 0; i < 3; ++i) {
    flat_step(a, per_param, i);
    flat_step(b, flat, i);
  }
  EXPECT_TRUE(flat.flat());
  EXPECT_TRUE(torch::equal(b->a->bias, frozen));
  EXPECT_FALSE(b->a->bias.is_alias_of(b->a->weight));
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::allclose(a->parameters()[i], b->parameters()[i], 0, 3e-8)) << i;
  }
}

// Gradients that are no longer views of the flat buffer (reset and made again by backward()):
// step() sees it and updates per parameter instead of reading the stale buffer. (zero_grad()
// refuses view gradients itself: it detaches them in place.)
TEST(FusedAdam, GradientsOutsideTheFlatBufferStepPerParameter) {
  FlatPair pair(5, torch::kCPU);
  auto& [a, b, per_param, flat, grads] = pair;
  ASSERT_TRUE(flat.flatten(grads));
  flat_step(a, per_param, 1);
  flat_step(b, flat, 1);
  for (int i = 2; i < 5; ++i) {
    for (Net* net : {&a, &b}) {
      for (auto& p : (*net)->parameters()) p.mutable_grad() = torch::Tensor();
      torch::manual_seed(i);
      (*net)->forward(torch::randn({3, 5, 6})).pow(2).mean().backward();
    }
    per_param.step();
    flat.step();
  }
  EXPECT_FALSE(flat.flat());
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::allclose(a->parameters()[i], b->parameters()[i], 0, 3e-8)) << i;
  }
  EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*flat.state().begin()->second).step(), 4);
}

// A flat optimizer saves compact moments that a fresh optimizer loads and continues from
// exactly (to the CPU kernel's tail rounding); loading into a flat one leaves the flat buffers.
TEST(FusedAdam, FlatSavesCompactMomentsAndLoadContinuesExactly) {
  testing::TempDir dir;
  torch::manual_seed(3);
  Net a;
  FusedAdam opt_a(a->parameters(), options());
  const torch::Tensor grads = flat_gradients(a);
  opt_a.init_state();
  ASSERT_TRUE(opt_a.flatten(grads));
  for (int i = 0; i < 4; ++i) flat_step(a, opt_a, i);
  save(opt_a, dir / "opt.pt");
  Net b = copy_of(a);
  FusedAdam opt_b(b->parameters(), options());
  load(opt_b, dir / "opt.pt");
  // Written as an unflattened optimizer writes them: each moment a tensor of its own, not a
  // view of the flat buffer.
  for (const auto& [key, state] : opt_b.state()) {
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*state);
    EXPECT_EQ(s.exp_avg().storage().nbytes(), s.exp_avg().nbytes());
    EXPECT_EQ(s.exp_avg_sq().storage().nbytes(), s.exp_avg_sq().nbytes());
  }
  flat_gradients(b);
  for (int i = 4; i < 8; ++i) {
    flat_step(a, opt_a, i);
    flat_step(b, opt_b, i);
  }
  // opt_b holds per-parameter moments: equal up to the CPU kernel's tail rounding (above).
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::allclose(a->parameters()[i], b->parameters()[i], 0, 3e-8)) << i;
  }

  load(opt_a, dir / "opt.pt");
  EXPECT_FALSE(opt_a.flat());
}

// Gradients that do not tile the buffer (one left out of it) or unequal step counts: flatten
// declines and changes nothing.
TEST(FusedAdam, FlattenDeclinesOtherLayouts) {
  torch::manual_seed(4);
  Net a;
  FusedAdam opt(a->parameters(), options());
  torch::Tensor grads = flat_gradients(a);
  a->parameters().front().mutable_grad() = torch::zeros_like(a->parameters().front());
  opt.init_state();
  const auto* data = a->parameters().back().data_ptr();
  EXPECT_FALSE(opt.flatten(grads));
  EXPECT_FALSE(opt.flat());
  EXPECT_EQ(a->parameters().back().data_ptr(), data);

  grads = flat_gradients(a);
  static_cast<torch::optim::AdamParamState&>(*opt.state().begin()->second).step(3);
  EXPECT_FALSE(opt.flatten(grads));
  EXPECT_FALSE(opt.flat());
}

}  // namespace
}  // namespace monoflow::train
