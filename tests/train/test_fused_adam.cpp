#include <gtest/gtest.h>

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
  torch::serialize::OutputArchive archive;
  opt_a.save(archive);
  archive.save_to(dir / "opt.pt");
  Net b;
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < a->parameters().size(); ++i) b->parameters()[i].copy_(a->parameters()[i]);
  }
  FusedAdam opt_b(b->parameters(), options());
  torch::serialize::InputArchive in;
  in.load_from(dir / "opt.pt");
  opt_b.load(in);
  for (int i = 5; i < 10; ++i) {
    step(a, opt_a, i);
    step(b, opt_b, i);
  }
  for (size_t i = 0; i < a->parameters().size(); ++i) EXPECT_TRUE(torch::equal(a->parameters()[i], b->parameters()[i])) << i;
}

}  // namespace
}  // namespace monoflow::train
