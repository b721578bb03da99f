// The invertible pieces of the decoder: inversion, log-determinants against autograd
// Jacobians, masking, DDI; and the relative-position attention against a direct formula.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model_test_util.h"
#include "models/attentions.h"
#include "models/decoder.h"
#include "models/modules.h"

namespace monoflow::models {
namespace {

using testing::randomize;
using testing::tiny_options;

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// A [B,1,T] mask with the given lengths.
torch::Tensor mask_of(std::vector<int64_t> lengths, int64_t t, torch::Dtype dtype) {
  auto l = torch::tensor(lengths, torch::kLong);
  return sequence_mask(l, t).unsqueeze(1).to(dtype);
}

// log|det J| of f at x (x [1,C,T], every element free), by autograd, one row per output element.
double autograd_logdet(const std::function<torch::Tensor(const torch::Tensor&)>& f, const torch::Tensor& x0) {
  auto x = x0.detach().clone().requires_grad_(true);
  auto y = f(x).reshape({-1});
  const int64_t n = y.numel();
  EXPECT_EQ(n, x.numel());
  auto jac = torch::zeros({n, n}, torch::kDouble);
  for (int64_t i = 0; i < n; ++i) {
    auto grad = torch::autograd::grad({y[i]}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/false,
                                      /*allow_unused=*/true)[0];
    jac[i] = grad.reshape({-1});
  }
  auto [sign, logabsdet] = torch::linalg_slogdet(jac);
  EXPECT_NE(sign.item<double>(), 0.0);
  return logabsdet.item<double>();
}

class FlowsTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(7); }
};

TEST_F(FlowsTest, SqueezeUnsqueezeRoundTripAndMask) {
  auto x = torch::randn({2, 3, 10});
  auto mask = mask_of({10, 7}, 10, torch::kFloat);
  auto [xs, ms] = squeeze(x * mask, mask, 2);
  EXPECT_EQ(xs.sizes(), (std::vector<int64_t>{2, 6, 5}));
  // The squeezed mask takes the second frame of each pair: length 7 -> 3 full pairs.
  EXPECT_TRUE(torch::equal(ms.sum({1, 2}), torch::tensor({5.0f, 3.0f})));
  // channel c*2+k of the squeezed tensor holds frame 2t+k... after permute: channel k*C+c
  EXPECT_EQ(xs[0][1 * 3 + 2][4].item<float>(), x[0][2][9].item<float>());
  auto [xu, mu] = unsqueeze(xs, ms, 2);
  auto full = mask_of({10, 6}, 10, torch::kFloat);
  EXPECT_TRUE(torch::equal(mu, full));
  EXPECT_TRUE(torch::equal(xu, x * full));
}

TEST_F(FlowsTest, EachFlowInvertsToTolerance) {
  const int64_t c = 8, t = 13;
  auto x = torch::randn({3, c, t});
  auto mask = mask_of({13, 9, 4}, t, torch::kFloat);
  x = x * mask;
  auto g = torch::nn::functional::normalize(torch::randn({3, 4}), torch::nn::functional::NormalizeFuncOptions().dim(1))
               .unsqueeze(-1);
  std::vector<std::pair<std::string, std::shared_ptr<Flow>>> flows;
  flows.emplace_back("ActNorm", std::make_shared<ActNormImpl>(c));
  flows.emplace_back("InvConvNear", std::make_shared<InvConvNearImpl>(c, 4));
  flows.emplace_back("CouplingBlock", std::make_shared<CouplingBlockImpl>(c, 16, 5, 2, 3, /*gin=*/4, 0.0, false));
  flows.emplace_back("CouplingBlock(sigmoid)", std::make_shared<CouplingBlockImpl>(c, 16, 3, 1, 2, 0, 0.0, true));
  for (auto& [name, f] : flows) {
    randomize(*f);
    auto gg = name == "CouplingBlock" ? g : torch::Tensor();
    auto [z, logdet] = f->forward(x, mask, gg, false);
    EXPECT_EQ(logdet.sizes(), (std::vector<int64_t>{3})) << name;
    EXPECT_GT(max_abs_diff(z, x), 1e-2) << name << " is (close to) the identity: the test would prove nothing";
    auto [x2, none] = f->forward(z, mask, gg, true);
    EXPECT_FALSE(none.defined());
    EXPECT_LT(max_abs_diff(x2, x), 1e-5) << name;
    torch::NoGradGuard no_grad;  // CPU inference: the reverse maps of flow_reverse_cpu.h
    EXPECT_LT(max_abs_diff(f->forward(z.detach(), mask, gg, true).first, x), 1e-5) << name << ", no gradient recorded";
  }
}

TEST_F(FlowsTest, DecoderInvertsToTolerance) {
  auto o = tiny_options();
  FlowSpecDecoder dec(o);
  randomize(*dec);
  dec->eval();  // p_dropout_dec 0.05: dropout would make forward and reverse different maps
  const int64_t t = 20;
  auto mask = mask_of({20, 14}, t, torch::kFloat);
  auto y = torch::randn({2, o.out_channels(), t}) * mask;
  auto [z, logdet] = dec->forward(y, mask);
  EXPECT_GT(max_abs_diff(z, y), 1e-2);
  auto [y2, none] = dec->forward(z, mask, {}, true);
  EXPECT_LT(max_abs_diff(y2, y), 1e-5);
  EXPECT_TRUE(torch::isfinite(logdet).all().item<bool>());
}

TEST_F(FlowsTest, LogDeterminantsEqualAutogradJacobian) {
  const int64_t c = 4, t = 3;
  auto x = torch::randn({1, c, t}, torch::kDouble);
  auto mask = torch::ones({1, 1, t}, torch::kDouble);
  auto act = std::make_shared<ActNormImpl>(c);
  auto inv = std::make_shared<InvConvNearImpl>(c, 4);
  auto cpl = std::make_shared<CouplingBlockImpl>(c, 6, 3, 2, 2, 0, 0.0, false);
  for (std::shared_ptr<Flow> f : std::vector<std::shared_ptr<Flow>>{act, inv, cpl}) {
    f->to(torch::kDouble);
    randomize(*f);
    {
      torch::NoGradGuard no_grad;  // a non-orthogonal matrix, so that log|det| != 0
      if (f == inv) inv->weight.add_(0.3 * torch::randn({4, 4}, torch::kDouble));
    }
    auto logdet = f->forward(x, mask).second.item<double>();
    auto expected = autograd_logdet([&](const torch::Tensor& v) { return f->forward(v, mask).first; }, x);
    EXPECT_NEAR(logdet, expected, 1e-10);
    EXPECT_GT(std::abs(expected), 1e-3);  // not trivially zero
  }
  // The whole decoder (squeeze, 2 blocks, unsqueeze), with a speaker vector.
  auto o = tiny_options().n_speakers(2).gin_channels(3);
  FlowSpecDecoder dec(o);
  dec->to(torch::kDouble);
  randomize(*dec);
  dec->eval();
  auto y = torch::randn({1, o.out_channels(), 6}, torch::kDouble);
  auto ymask = torch::ones({1, 1, 6}, torch::kDouble);
  auto g = torch::randn({1, 3, 1}, torch::kDouble);
  auto logdet = dec->forward(y, ymask, g).second.item<double>();
  auto expected = autograd_logdet([&](const torch::Tensor& v) { return dec->forward(v, ymask, g).first; }, y);
  EXPECT_NEAR(logdet, expected, 1e-9);
}

// The decoder adds ActNorm's and InvConvNear's log-determinants itself, the InvConvNear ones
// from one batched Leibniz evaluation (decoder.cpp: FrameLogDets); each flow on its own
// computes its own. Both must give the same log-det and the same gradients: matrices of
// different determinants, so that one counted twice or left out changes the total and the
// gradients, and afterwards a flow must compute its own again.
TEST_F(FlowsTest, DecoderFrameLogDeterminantsEqualEachFlowsOwnWithGradients) {
  auto o = tiny_options().n_blocks_dec(3);
  FlowSpecDecoder dec(o);
  dec->to(torch::kDouble);
  randomize(*dec);
  dec->eval();
  std::vector<InvConvNearImpl*> invconvs;
  {
    torch::NoGradGuard no_grad;
    for (const auto& f : dec->flow_list()) {
      if (auto* inv = dynamic_cast<InvConvNearImpl*>(f.get())) {
        inv->weight.mul_(1.0 + 0.5 * static_cast<double>(invconvs.size()));  // log det 0, 4 log 1.5, 4 log 2
        inv->weight.add_(0.1 * torch::randn_like(inv->weight));
        invconvs.push_back(inv);
      }
    }
  }
  ASSERT_EQ(invconvs.size(), 3u);
  const int64_t t = 8;
  const auto y = torch::randn({2, o.out_channels(), t}, torch::kDouble);
  const auto mask = mask_of({8, 6}, t, torch::kDouble);
  const auto grads_of = [&](const torch::Tensor& logdet) {
    dec->zero_grad();
    logdet.sum().backward();
    std::vector<torch::Tensor> g;
    for (auto* inv : invconvs) g.push_back(inv->weight.grad().clone());
    for (const auto& p : dec->parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    return g;
  };
  // Each flow on its own, as the decoder's loop does, around its squeeze.
  auto [x, x_mask] = squeeze(y, mask, o.n_sqz());
  auto own = torch::zeros({2}, torch::kDouble);
  for (const auto& f : dec->flow_list()) {
    auto [z, logdet] = f->forward(x, x_mask, {}, false);
    x = z;
    own = own + logdet;
  }
  const auto own_grads = grads_of(own);
  const auto batched = dec->forward(y, mask).second;
  const auto batched_grads = grads_of(batched);
  EXPECT_LT(max_abs_diff(batched, own), 1e-12);
  EXPECT_GT(batched.abs().max().item<double>(), 1e-2);
  ASSERT_EQ(batched_grads.size(), own_grads.size());
  for (size_t i = 0; i < own_grads.size(); ++i) {
    if (!own_grads[i].defined()) continue;
    EXPECT_LT(max_abs_diff(batched_grads[i], own_grads[i]), 1e-12) << "gradient " << i;
  }
  EXPECT_GT(max_abs_diff(own_grads[0], own_grads[2]), 1e-3);
  // After the decoder's forward, a flow computes its own log-det again, from its current weight.
  {
    torch::NoGradGuard no_grad;
    invconvs[1]->weight.mul_(2.0);
  }
  const auto [x_sq, mask_sq] = squeeze(y, mask, o.n_sqz());
  const auto alone = invconvs[1]->forward(x_sq, mask_sq, {}, false).second;
  const double c = static_cast<double>(x_sq.size(1)), n = 4;
  const auto expected = torch::logdet(invconvs[1]->weight.detach()) * (c / n) * mask_sq.sum({1, 2});
  EXPECT_LT(max_abs_diff(alone, expected), 1e-10);
}

// The Leibniz log-determinant against torch::logdet, values and gradients (W^-T), for a batch of
// 4 x 4 and 6 x 6 matrices on every device; its gradient is summed in a fixed order, so two
// backward passes give the same bits (on a GPU too, where index_select's atomics did not).
TEST_F(FlowsTest, LeibnizLogDetEqualsLogdetWithRepeatableGradients) {
  for (const auto& device : testing::devices()) {
    for (const int64_t n : {4, 6}) {
      SCOPED_TRACE(device.str() + ", n = " + std::to_string(n));
      const auto options = torch::TensorOptions().device(device).dtype(torch::kFloat);
      const auto w0 = torch::eye(n, options).expand({3, n, n}) + 0.2 * torch::randn({3, n, n}, options);
      LeibnizLogDet log_det;
      const auto grad_of = [&](const torch::Tensor& w) {
        const auto leaf = w.detach().clone().requires_grad_();
        const auto value = log_det(leaf);
        (value * torch::tensor({1.0f, -2.0f, 0.5f}, options)).sum().backward();
        return std::make_pair(value.detach(), leaf.grad());
      };
      const auto [value, grad] = grad_of(w0);
      const auto want_leaf = w0.to(torch::kDouble).detach().requires_grad_();
      const auto want = torch::logdet(want_leaf);
      (want * torch::tensor({1.0, -2.0, 0.5}, want.options())).sum().backward();
      EXPECT_LT(max_abs_diff(value.to(torch::kDouble), want.detach()), 1e-5);
      EXPECT_LT(max_abs_diff(grad.to(torch::kDouble), want_leaf.grad()), 1e-4);
      EXPECT_TRUE(torch::equal(grad_of(w0).second, grad));
    }
  }
}

TEST_F(FlowsTest, PaddingDoesNotChangeValidOutputs) {
  auto o = tiny_options();
  FlowSpecDecoder dec(o);
  randomize(*dec);
  dec->to(torch::kDouble);
  dec->eval();
  const int64_t len = 8, t = 14;
  auto y = torch::randn({1, o.out_channels(), len}, torch::kDouble);
  auto [z1, ld1] = dec->forward(y, torch::ones({1, 1, len}, torch::kDouble));
  // Same utterance padded with garbage (zeroed by the caller's mask as the data loader would not).
  auto padded = torch::cat({y, 100 * torch::randn({1, o.out_channels(), t - len}, torch::kDouble)}, 2);
  auto mask = mask_of({len}, t, torch::kDouble);
  auto [z2, ld2] = dec->forward(padded, mask);
  EXPECT_LT(max_abs_diff(z2.slice(2, 0, len), z1), 1e-12);
  EXPECT_EQ(z2.slice(2, len).abs().max().item<double>(), 0.0);
  EXPECT_NEAR(ld1.item<double>(), ld2.item<double>(), 1e-10);
}

TEST_F(FlowsTest, ActNormDataDependentInit) {
  const int64_t c = 6, t = 30;
  ActNorm act(c, /*ddi=*/true);
  EXPECT_FALSE(act->initialized());
  auto mask = mask_of({30, 21}, t, torch::kFloat);
  auto x = (torch::randn({2, c, t}) * torch::linspace(0.5, 3, c).view({1, c, 1}) + 4) * mask;
  auto z = act->forward(x, mask).first;
  EXPECT_TRUE(act->initialized());
  auto n = mask.sum();
  auto mean = (z * mask).sum(at::IntArrayRef{0, 2}) / n;
  auto var = (z * z * mask).sum(at::IntArrayRef{0, 2}) / n - mean * mean;
  EXPECT_LT(mean.abs().max().item<float>(), 1e-5);
  EXPECT_LT((var - 1).abs().max().item<float>(), 1e-4);
  // Initialised once: a second batch does not re-initialise.
  auto logs = act->logs.clone();
  act->forward(x * 2, mask);
  EXPECT_TRUE(torch::equal(logs, act->logs));
}

TEST_F(FlowsTest, InvConvNearInitIsRotation) {
  InvConvNear inv(8, 4);
  auto w = inv->weight.to(torch::kDouble);
  EXPECT_LT(max_abs_diff(torch::matmul(w, w.t()), torch::eye(4, torch::kDouble)), 1e-5);
  EXPECT_NEAR(torch::det(w).item<double>(), 1.0, 1e-5);
}

// Under cache_inference_weights the reverse pass keeps W^-1 while the weight is unchanged; an
// in-place update (a loaded checkpoint) must invalidate it. Without it (the default), W^-1
// follows an update that leaves the weight's version as it was (a view of an optimizer's flat
// buffer, set_data, updated through the buffer).
TEST_F(FlowsTest, InvConvNearReverseFollowsWeightUpdates) {
  for (bool cached : {true, false}) {
    InvConvNear inv(8, 4);
    cache_inference_weights(*inv, cached);
    torch::NoGradGuard no_grad;
    auto x = torch::randn({2, 8, 10});
    auto mask = torch::ones({2, 1, 10});
    const auto flat = inv->weight.detach().flatten().clone();
    if (!cached) inv->weight.set_data(flat.view_as(inv->weight));
    for (int round = 0; round < 2; ++round) {
      auto z = inv->forward(x, mask).first;
      EXPECT_LT(max_abs_diff(inv->forward(z, mask, {}, true).first, x), 1e-5) << "round " << round;
      const auto rotation = std::get<0>(torch::linalg_qr(torch::randn({4, 4})));  // another one
      if (cached) {
        inv->weight.copy_(rotation);
      } else {
        flat.copy_(rotation.flatten());
      }
    }
    auto z = inv->forward(x, mask).first;
    EXPECT_LT(max_abs_diff(inv->forward(z, mask, {}, true).first, x), 1e-5) << "cached " << cached;
  }
}

TEST_F(FlowsTest, CouplingStartsAsIdentityOnSecondHalf) {
  CouplingBlock cpl(8, 16, 5, 1, 4);
  auto x = torch::randn({2, 8, 9});
  auto mask = torch::ones({2, 1, 9});
  auto [z, logdet] = cpl->forward(x, mask);
  EXPECT_TRUE(torch::equal(z, x));  // end conv zero-initialised: m = 0, logs = 0
  EXPECT_EQ(logdet.abs().max().item<float>(), 0.0f);
}

// The band maps (attentions.cpp: the window's 2w + 1 diagonals of an [l, l] matrix) against the
// official code's pads and reshapes of the whole [l, 2l - 1] relative matrix, whose columns
// beyond the window the official fills with zeros (its embeddings are zero-padded there):
// values and gradients, at lengths 1 to 7 (shorter and longer than the window).
TEST_F(FlowsTest, RelativePositionBandsEqualTheOfficialPadsWithGradients) {
  namespace F = torch::nn::functional;
  const auto official_to_absolute = [](const torch::Tensor& x_in) {
    const int64_t b = x_in.size(0), h = x_in.size(1), l = x_in.size(2);
    auto x = F::pad(x_in, F::PadFuncOptions({0, 1}));
    auto flat = F::pad(x.reshape({b, h, l * 2 * l}), F::PadFuncOptions({0, l - 1}));
    return flat.view({b, h, l + 1, 2 * l - 1}).slice(2, 0, l).slice(3, l - 1);
  };
  const auto official_to_relative = [](const torch::Tensor& x_in) {
    const int64_t b = x_in.size(0), h = x_in.size(1), l = x_in.size(2);
    auto x = F::pad(x_in, F::PadFuncOptions({0, l - 1}));
    auto flat = F::pad(x.reshape({b, h, l * l + l * (l - 1)}), F::PadFuncOptions({l, 0}));
    return flat.view({b, h, l, 2 * l}).slice(3, 1);
  };
  const int64_t w = 2, n = 2 * w + 1;
  for (int64_t l : {1, 2, 3, 7}) {
    SCOPED_TRACE("l = " + std::to_string(l));
    // band column k is relative column k + l - 1 - w where both exist
    const int64_t k_lo = std::max<int64_t>(0, w - l + 1), k_hi = std::min<int64_t>(n, w + l);
    const int64_t c_lo = k_lo + l - 1 - w, c_hi = k_hi + l - 1 - w;

    const auto band = torch::randn({2, 3, l, n}, torch::kDouble);
    auto a = band.clone().requires_grad_(), b = band.clone().requires_grad_();
    auto rel = torch::zeros({2, 3, l, 2 * l - 1}, torch::kDouble);
    rel.slice(3, c_lo, c_hi).copy_(b.slice(3, k_lo, k_hi));
    const auto grad_abs = torch::randn({2, 3, l, l}, torch::kDouble);
    const auto ours = MultiHeadAttentionImpl::band_to_absolute(a), theirs = official_to_absolute(rel);
    EXPECT_TRUE(torch::equal(ours, theirs));
    ours.backward(grad_abs);
    theirs.backward(grad_abs);
    EXPECT_TRUE(torch::equal(a.grad(), b.grad()));

    const auto abs = torch::randn({2, 3, l, l}, torch::kDouble);
    auto c = abs.clone().requires_grad_(), d = abs.clone().requires_grad_();
    const auto grad_band = torch::randn({2, 3, l, n}, torch::kDouble);
    const auto ours_band = MultiHeadAttentionImpl::absolute_to_band(c, n);
    auto theirs_band = torch::zeros({2, 3, l, n}, torch::kDouble);
    theirs_band.slice(3, k_lo, k_hi).copy_(official_to_relative(d).slice(3, c_lo, c_hi));
    EXPECT_TRUE(torch::equal(ours_band, theirs_band));
    ours_band.backward(grad_band);
    theirs_band.backward(grad_band);
    EXPECT_TRUE(torch::equal(c.grad(), d.grad()));
  }
}

// score[i][j] += q_i . e_{j-i} where |j - i| <= w, out_i += sum_j p_ij e_{j-i} likewise: the
// relative-position attention written directly, against the band products of attentions.cpp.
TEST_F(FlowsTest, RelativeAttentionMatchesDirectFormula) {
  const int64_t ch = 6, heads = 2, window = 2, kc = ch / heads;
  MultiHeadAttention mha(ch, ch, heads, window, 0.0);
  mha->to(torch::kDouble);
  for (int64_t t : {1, 2, 3, 4, 7}) {
    auto x = torch::randn({2, ch, t}, torch::kDouble);
    auto lens = std::vector<int64_t>{t, std::max<int64_t>(1, t - 1)};
    auto m = mask_of(lens, t, torch::kDouble);
    auto attn_mask = m.unsqueeze(2) * m.unsqueeze(-1);
    auto out = mha->forward(x, x, attn_mask);

    auto params = mha->named_parameters();
    auto conv = [&](const std::string& p, const torch::Tensor& v) {
      return torch::conv1d(v, params[p + ".weight"], params[p + ".bias"]);
    };
    auto q = conv("conv_q", x).view({2, heads, kc, t}), k = conv("conv_k", x).view({2, heads, kc, t}),
         v = conv("conv_v", x).view({2, heads, kc, t});
    auto ek = params["emb_rel_k"][0], ev = params["emb_rel_v"][0];
    auto expected = torch::zeros({2, heads, kc, t}, torch::kDouble);
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        auto scores = torch::zeros({t, t}, torch::kDouble);
        for (int64_t i = 0; i < t; ++i) {
          for (int64_t j = 0; j < t; ++j) {
            double s = torch::dot(q[b][h].select(1, i), k[b][h].select(1, j)).item<double>();
            if (std::abs(j - i) <= window) s += torch::dot(q[b][h].select(1, i), ek[j - i + window]).item<double>();
            s /= std::sqrt(static_cast<double>(kc));
            if (j >= lens[b] || i >= lens[b]) s = -1e4;
            scores[i][j] = s;
          }
        }
        auto p = torch::softmax(scores, 1);
        for (int64_t i = 0; i < t; ++i) {
          auto acc = torch::zeros({kc}, torch::kDouble);
          for (int64_t j = 0; j < t; ++j) {
            acc += p[i][j] * v[b][h].select(1, j);
            if (std::abs(j - i) <= window) acc += p[i][j] * ev[j - i + window];
          }
          expected[b][h].select(1, i).copy_(acc);
        }
      }
    }
    auto exp_out = conv("conv_o", expected.view({2, ch, t}));
    EXPECT_LT(max_abs_diff(out, exp_out), 1e-10) << "t=" << t;
  }
}

}  // namespace
}  // namespace monoflow::models
