#include "models/modules.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "models/channel_norm_cpu.h"
#include "models/conv_bias.h"
#include "models/dropout.h"
#include "models/flow_fused.h"
#include "models/flow_train_cpu.h"
#include "models/winograd_conv1d.h"
#include "models/wn_fused.h"

#ifdef MONOFLOW_HAS_CUDA
#include "models/channel_norm_cuda.h"
#include "models/flow_fused_cuda.h"
#endif

namespace monoflow::models {

namespace F = torch::nn::functional;

torch::Tensor sequence_mask(const torch::Tensor& lengths, int64_t max_length) {
  auto range = torch::arange(max_length, lengths.options());
  return range.unsqueeze(0) < lengths.unsqueeze(1);
}

std::pair<torch::Tensor, torch::Tensor> squeeze(const torch::Tensor& x, const torch::Tensor& x_mask, int64_t n_sqz) {
  const int64_t b = x.size(0), c = x.size(1), t = (x.size(2) / n_sqz) * n_sqz;
  auto x_sqz = x.slice(2, 0, t)
                   .reshape({b, c, t / n_sqz, n_sqz})
                   .permute({0, 3, 1, 2})
                   .reshape({b, c * n_sqz, t / n_sqz});
  torch::Tensor mask;
  if (x_mask.defined()) {
    // Contiguous once here: every flow's kernels read the mask so, and each made its own copy.
    mask = x_mask.slice(2, n_sqz - 1, x_mask.size(2), n_sqz).contiguous();
  } else {
    mask = torch::ones({b, 1, t / n_sqz}, x.options());
  }
  return {x_sqz * mask, mask};
}

std::pair<torch::Tensor, torch::Tensor> unsqueeze(const torch::Tensor& x, const torch::Tensor& x_mask, int64_t n_sqz) {
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2);
  auto x_unsqz = x.reshape({b, n_sqz, c / n_sqz, t}).permute({0, 2, 3, 1}).reshape({b, c / n_sqz, t * n_sqz});
  torch::Tensor mask;
  if (x_mask.defined()) {
    mask = x_mask.unsqueeze(-1).repeat({1, 1, 1, n_sqz}).reshape({b, 1, t * n_sqz});
  } else {
    mask = torch::ones({b, 1, t * n_sqz}, x.options());
  }
  return {x_unsqz * mask, mask};
}

// ---------------------------------------------------------------------------------------------
LayerNormImpl::LayerNormImpl(int64_t channels, double eps) : eps_(eps) {
  gamma = register_parameter("gamma", torch::ones({channels}));
  beta = register_parameter("beta", torch::zeros({channels}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) { return forward(x, {}, {}); }

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& mask) {
  // The original normalises over channels with a composite of means (biased variance, eps
  // inside the root). at::layer_norm over the last dimension computes the same in one kernel
  // each way, where the composite took ~10 forward and ~20 backward: the channels go last and
  // come back, one copy each (on the CPU).
#ifdef MONOFLOW_HAS_CUDA
  // On the GPU one kernel each way on [B, C, T] itself (kernels/channel_norm.cu).
  if (cuda::fused_channel_norm_applies(x, gamma, beta, residual, mask)) {
    return cuda::channel_layer_norm(x, gamma, beta, eps_, residual, mask);
  }
#endif
  // On the CPU in float32, one pass each way on [B, C, T] too (channel_norm_cpu.h).
  if (cpu::channel_norm_cpu_applies(x, gamma, beta, residual, mask)) {
    return cpu::channel_layer_norm_cpu(x, gamma, beta, eps_, residual, mask);
  }
  const auto input = residual.defined() ? x + residual : x;
  const int64_t channels = x.size(1);
  auto y = at::layer_norm(input.transpose(1, -1), {channels}, gamma.to(x.scalar_type()), beta.to(x.scalar_type()), eps_)
               .transpose(1, -1)
               .contiguous();
  return mask.defined() ? masked(y, mask) : y;
}

// ---------------------------------------------------------------------------------------------
ConvReluNormImpl::ConvReluNormImpl(int64_t in_channels, int64_t hidden_channels, int64_t out_channels,
                                   int64_t kernel_size, int64_t n_layers, double p_dropout)
    : p_dropout_(p_dropout) {
  TORCH_CHECK(n_layers > 1, "ConvReluNorm needs more than one layer");
  conv_layers = register_module("conv_layers", torch::nn::ModuleList());
  norm_layers = register_module("norm_layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < n_layers; ++i) {
    conv_layers->push_back(torch::nn::Conv1d(
        torch::nn::Conv1dOptions(i == 0 ? in_channels : hidden_channels, hidden_channels, kernel_size)
            .padding(kernel_size / 2)));
    norm_layers->push_back(LayerNorm(hidden_channels));
  }
  proj = register_module("proj", torch::nn::Conv1d(torch::nn::Conv1dOptions(hidden_channels, out_channels, 1)));
  torch::NoGradGuard no_grad;
  proj->weight.zero_();
  proj->bias.zero_();
}

torch::Tensor ConvReluNormImpl::forward(const torch::Tensor& x_org, const torch::Tensor& x_mask) {
  // The official masks each convolution's input; here the first's and then each norm's output
  // (ReLU and dropout keep zeros zero), the same values in every unmasked frame.
  auto x = masked(x_org, x_mask);
  for (size_t i = 0; i < conv_layers->size(); ++i) {
    x = conv1d_forward(*conv_layers[i]->as<torch::nn::Conv1d>(), x);
    x = norm_layers[i]->as<LayerNorm>()->forward(x, {}, x_mask);
    x = models::dropout(torch::relu(x), p_dropout_, is_training());
  }
  return masked(x_org + conv1d_forward(*proj, x), x_mask);
}

// ---------------------------------------------------------------------------------------------
WeightNormConv1dImpl::WeightNormConv1dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                           int64_t dilation, int64_t padding)
    : dilation_(dilation), padding_(padding) {
  // Conv1d's default initialisation, then weight_norm's g = ||v||.
  auto v = torch::empty({out_channels, in_channels, kernel_size});
  torch::nn::init::kaiming_uniform_(v, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels * kernel_size));
  bias = register_parameter("bias", torch::empty({out_channels}).uniform_(-bound, bound));
  weight_g = register_parameter("weight_g", v.flatten(1).norm(2, {1}).view({out_channels, 1, 1}));
  weight_v = register_parameter("weight_v", v);
}

torch::Tensor WeightNormConv1dImpl::weight() const {
  return step_weight_.defined() ? step_weight_ : torch::_weight_norm(weight_v, weight_g, 0);
}

bool WeightNormConv1dImpl::inference_cache_valid() const {
  return cached_of_[0] == weight_v.data_ptr() && cached_version_[0] == weight_v._version() &&
         cached_of_[1] == weight_g.data_ptr() && cached_version_[1] == weight_g._version();
}

torch::Tensor WeightNormConv1dImpl::inference_weight() {
  if (torch::GradMode::is_enabled() || !weight_v.device().is_cpu() || step_weight_.defined()) return {};
  if (!cache_) return torch::_weight_norm(weight_v, weight_g, 0);
  if (!cached_weight_.defined() || !inference_cache_valid()) {
    cached_weight_ = torch::_weight_norm(weight_v, weight_g, 0);
    cached_winograd_ = torch::Tensor();
    cached_rows_ = torch::Tensor();
    cached_of_[0] = weight_v.data_ptr();
    cached_of_[1] = weight_g.data_ptr();
    cached_version_[0] = weight_v._version();
    cached_version_[1] = weight_g._version();
  }
  return cached_weight_;
}

torch::Tensor WeightNormConv1dImpl::inference_winograd_weight() {
  const auto w = inference_weight();
  if (!w.defined() || w.size(2) != 5) return {};
  if (!cache_) return winograd_weight(w);
  if (!cached_winograd_.defined()) cached_winograd_ = winograd_weight(w);
  return cached_winograd_;
}

torch::Tensor WeightNormConv1dImpl::inference_rows_weight() {
  const auto w = inference_weight();
  if (!w.defined() || w.size(2) != 1) return {};
  if (!cache_) return winograd_rows_weight(w);
  if (!cached_rows_.defined()) cached_rows_ = winograd_rows_weight(w);
  return cached_rows_;
}

void WeightNormConv1dImpl::set_inference_cache(bool on) {
  cache_ = on;
  if (on) return;
  cached_weight_ = cached_winograd_ = cached_rows_ = torch::Tensor();
  cached_of_[0] = cached_of_[1] = nullptr;
}

torch::Tensor WeightNormConv1dImpl::forward(const torch::Tensor& x) {
  const auto cached = inference_weight();
  take_step_weight();
  return conv_over_time(x, cached.defined() ? cached : weight(), bias, padding_, dilation_);
}

void WeightNormConv1dImpl::take_step_weight() {
  // A joined weight has one consumer (weight_grads_aside_cuda.h): a second use in one forward
  // would add its gradient to the side stream's before the join.
  TORCH_CHECK(!step_weight_grad_aside_ || !step_weight_taken_,
              "WeightNormConv1d: a step weight whose gradient goes aside used twice in one forward");
  step_weight_taken_ = step_weight_.defined();
}

torch::Tensor WeightNormConv1dImpl::forward_without_bias(const torch::Tensor& x) {
  const auto cached = inference_weight();
  take_step_weight();
  return conv_over_time(x, cached.defined() ? cached : weight(), {}, padding_, dilation_, step_weight_grad_aside_);
}

// ---------------------------------------------------------------------------------------------
WNImpl::WNImpl(int64_t hidden_channels, int64_t kernel_size, int64_t dilation_rate, int64_t n_layers,
               int64_t gin_channels, double p_dropout)
    : hidden_channels_(hidden_channels), n_layers_(n_layers), p_dropout_(p_dropout) {
  TORCH_CHECK(kernel_size % 2 == 1, "WN: kernel_size must be odd");
  TORCH_CHECK(hidden_channels % 2 == 0, "WN: hidden_channels must be even");
  in_layers = register_module("in_layers", torch::nn::ModuleList());
  res_skip_layers = register_module("res_skip_layers", torch::nn::ModuleList());
  if (gin_channels != 0) {
    cond_layer = register_module("cond_layer", WeightNormConv1d(gin_channels, 2 * hidden_channels * n_layers, 1));
  }
  int64_t dilation = 1;
  for (int64_t i = 0; i < n_layers; ++i) {
    const int64_t padding = (kernel_size * dilation - dilation) / 2;
    in_layers->push_back(WeightNormConv1d(hidden_channels, 2 * hidden_channels, kernel_size, dilation, padding));
    const int64_t res_skip_channels = i < n_layers - 1 ? 2 * hidden_channels : hidden_channels;
    res_skip_layers->push_back(WeightNormConv1d(hidden_channels, res_skip_channels, 1));
    dilation *= dilation_rate;
  }
}

namespace {

// Whether the mask zeroes any frame. CPU inference zeroes padding after every residual update,
// as forward() does; with no padding the products by ones change nothing and are left out.
bool has_padding(const torch::Tensor& x_mask) { return x_mask.numel() > 0 && x_mask.min().item<float>() != 1.0f; }

}  // namespace

bool WNImpl::cpu_inference_applies(const torch::Tensor& x) const {
  return !torch::GradMode::is_enabled() && x.device().is_cpu() && x.scalar_type() == torch::kFloat && x.dim() == 3 &&
         (!is_training() || p_dropout_ == 0.0);
}

torch::Tensor WNImpl::forward_cpu_inference(const torch::Tensor& x_in, const torch::Tensor& x_mask_in,
                                            const torch::Tensor& g) {
  const int64_t batch = x_in.size(0), h = hidden_channels_;
  const torch::Tensor x_mask = x_mask_in.contiguous();
  const bool masked = has_padding(x_mask);
  auto x = x_in.contiguous().clone();  // updated in place below
  auto output = torch::zeros_like(x);
  for (int64_t i = 0; i < n_layers_; ++i) {
    auto& in_layer = *in_layers[i]->as<WeightNormConv1d>();
    auto& res_skip_layer = *res_skip_layers[i]->as<WeightNormConv1d>();
    const bool last = i == n_layers_ - 1;
    torch::Tensor acts;
    const auto u = winograd_applies(x, in_layer.inference_weight(), in_layer.padding(), in_layer.dilation())
                       ? in_layer.inference_winograd_weight()
                       : torch::Tensor();
    const auto rows = u.defined() && !g.defined() ? res_skip_layer.inference_rows_weight() : torch::Tensor();
    if (rows.defined()) {
      // The gate and the res_skip product in one pass, 32 frames at a time, added in place.
      winograd_wn_layer(x, u, in_layer.bias, rows, res_skip_layer.bias, last ? torch::Tensor() : x, output);
      if (!last && masked) x.mul_(x_mask);
      continue;
    }
    if (u.defined() && !g.defined()) {
      acts = winograd_conv1d_gated(x, u, in_layer.bias);
    } else {
      auto x_in = u.defined() ? winograd_conv1d(x, u, in_layer.bias) : in_layer.forward(x);
      if (g.defined()) x_in = x_in + g.slice(1, i * 2 * h, (i + 1) * 2 * h);
      acts = gated_activation(x_in);
    }
    // The 1x1 res_skip convolution as products added in place: x += W_res acts, output +=
    // W_skip acts (the last layer has only the skip half), then the biases.
    const auto w = res_skip_layer.inference_weight().squeeze(2);
    for (int64_t b = 0; b < batch; ++b) {
      const auto a = acts.select(0, b);
      if (last) {
        output.select(0, b).addmm_(w, a);
      } else {
        x.select(0, b).addmm_(w.slice(0, 0, h), a);
        output.select(0, b).addmm_(w.slice(0, h, 2 * h), a);
      }
    }
    if (last) {
      output.add_(res_skip_layer.bias.view({1, h, 1}));
    } else {
      x.add_(res_skip_layer.bias.slice(0, 0, h).view({1, h, 1}));
      output.add_(res_skip_layer.bias.slice(0, h, 2 * h).view({1, h, 1}));
    }
    if (!last && masked) x.mul_(x_mask);
  }
  if (masked) output.mul_(x_mask);
  return output;
}

const std::vector<torch::Tensor>& WNImpl::folded_res_skip(const torch::Tensor& proj_weight) {
  std::vector<torch::Tensor> from;
  for (int64_t i = 0; i < n_layers_; ++i) from.push_back(res_skip_layers[i]->as<WeightNormConv1d>()->inference_weight());
  bool valid = folded_proj_ == proj_weight.data_ptr() && folded_proj_version_ == proj_weight._version() &&
               folded_from_.size() == from.size();
  for (size_t i = 0; valid && i < from.size(); ++i) valid = folded_from_[i].is_same(from[i]);
  if (valid) return folded_weight_;
  const int64_t h = hidden_channels_;
  const auto p = proj_weight.detach().squeeze(2).to(torch::kDouble);
  folded_weight_.clear();
  folded_bias_.clear();
  for (int64_t i = 0; i < n_layers_; ++i) {
    const auto& rs = *res_skip_layers[i]->as<WeightNormConv1d>();
    const auto w = from[i].squeeze(2).to(torch::kDouble);
    const auto b = rs.bias.detach().to(torch::kDouble);
    const bool last = i == n_layers_ - 1;
    // rows: the residual's h (all but the last layer), then P W_skip
    const auto w_skip = last ? w : w.slice(0, h, 2 * h);
    const auto b_skip = last ? b : b.slice(0, h, 2 * h);
    auto wf = torch::matmul(p, w_skip), bf = torch::matmul(p, b_skip);
    if (!last) {
      wf = torch::cat({w.slice(0, 0, h), wf});
      bf = torch::cat({b.slice(0, 0, h), bf});
    }
    folded_weight_.push_back(winograd_rows_weight(wf.to(torch::kFloat)));
    folded_bias_.push_back(bf.to(torch::kFloat));
  }
  folded_from_ = std::move(from);
  folded_proj_ = proj_weight.data_ptr();
  folded_proj_version_ = proj_weight._version();
  return folded_weight_;
}

torch::Tensor WNImpl::forward_projected(const torch::Tensor& x_in, const torch::Tensor& x_mask_in,
                                        const torch::Tensor& g, const torch::Tensor& proj_weight,
                                        const torch::Tensor& proj_bias) {
  bool fold = cpu_inference_applies(x_in) && !g.defined() && proj_weight.dim() == 3 && proj_weight.size(2) == 1 &&
              proj_weight.device().is_cpu() && proj_weight.scalar_type() == torch::kFloat;
  std::vector<torch::Tensor> u;
  for (int64_t i = 0; fold && i < n_layers_; ++i) {
    auto& in_layer = *in_layers[i]->as<WeightNormConv1d>();
    fold = winograd_applies(x_in, in_layer.inference_weight(), in_layer.padding(), in_layer.dilation());
    if (fold) u.push_back(in_layer.inference_winograd_weight());
  }
  if (!fold) return conv_over_time(forward(x_in, x_mask_in, g), proj_weight, proj_bias);
  const auto& weights = folded_res_skip(proj_weight);
  const torch::Tensor x_mask = x_mask_in.contiguous();
  const bool masked = has_padding(x_mask);
  auto x = x_in.contiguous().clone();  // updated in place
  auto out = torch::zeros({x.size(0), proj_weight.size(0), x.size(2)}, x.options());
  for (int64_t i = 0; i < n_layers_; ++i) {
    const bool last = i == n_layers_ - 1;
    winograd_wn_layer(x, u[i], in_layers[i]->as<WeightNormConv1d>()->bias, weights[i], folded_bias_[i],
                      last ? torch::Tensor() : x, out);
    if (!last && masked) x.mul_(x_mask);
  }
  // WN masks its output before the projection, whose bias is not masked.
  if (masked) out.mul_(x_mask);
  if (proj_bias.defined()) out.add_(proj_bias.view({1, -1, 1}));
  return out;
}

torch::Tensor WNImpl::forward(torch::Tensor x, const torch::Tensor& x_mask_in, const torch::Tensor& g_in,
                              const torch::Tensor& x_low) {
  if (cpu_inference_applies(x)) {
    return forward_cpu_inference(x, x_mask_in, g_in.defined() ? cond_layer->forward(g_in) : torch::Tensor());
  }
  const torch::Tensor x_mask = x_mask_in.contiguous();  // once, not in every layer's update
  torch::Tensor g;
  if (g_in.defined()) g = cond_layer->forward(g_in);
  // Fused kernels (wn_fused.h) take the convolutions' biases and the dropout; the speaker
  // conditioning, added after dropout, keeps the composite path.
  const bool fused = wn_fused_applies(x) && !g.defined();
  // The skip sum: the fused update's first layer starts it (undefined: zero), with no zero fill.
  torch::Tensor output = fused ? torch::Tensor() : torch::zeros_like(x);
  // Under autocast the residual update also hands the next in_layer its input in the
  // convolutions' dtype (residual_skip's x_low), so that the convolution casts nothing; and
  // the last layer's sum comes only in that dtype, for the coupling's end product.
  const bool low_copies = fused && at::autocast::is_autocast_enabled(at::kCUDA);
  torch::Tensor in_layer_input = low_copies && x_low.defined() ? x_low : x;
  const int64_t h = hidden_channels_;
  for (int64_t i = 0; i < n_layers_; ++i) {
    auto& in_layer = *in_layers[i]->as<WeightNormConv1d>();
    auto& res_skip_layer = *res_skip_layers[i]->as<WeightNormConv1d>();
    const bool last = i == n_layers_ - 1;
    torch::Tensor acts;
    if (fused) {
      acts = gated_activation(in_layer.forward_without_bias(in_layer_input), in_layer.bias, p_dropout_, is_training());
    } else {
      auto x_in = models::dropout(in_layer.forward(x), p_dropout_, is_training());
      if (g.defined()) {
        auto g_l = g.slice(1, i * 2 * h, (i + 1) * 2 * h);
        x_in = x_in + (x_in.dim() == 4 ? g_l.unsqueeze(-1) : g_l);  // [B, 2H, 1(, 1)] over time
      }
      acts = gated_activation(x_in);
    }
    if (last) {
      // The last layer's output joins the skip sum, masked: one kernel (or CPU pass) each way.
      if (fused) {
        const auto sum = masked_sum(output, res_skip_layer.forward_without_bias(acts), res_skip_layer.bias, x_mask,
                                    low_copies, /*low_only=*/low_copies);
        return low_copies ? sum.out_low : sum.out;
      }
      return masked_sum(output, res_skip_layer.forward(acts), {}, x_mask).out;
    } else {
      auto out = fused ? residual_skip(x, output, res_skip_layer.forward_without_bias(acts), res_skip_layer.bias,
                                       x_mask, low_copies)
                       : residual_skip(x, output, res_skip_layer.forward(acts), {}, x_mask);
      x = out.x;
      output = out.skip;
      in_layer_input = low_copies ? out.x_low : x;
    }
  }
  return output.defined() ? output * x_mask : torch::zeros_like(x);  // no layers: nothing to sum
}

// ---------------------------------------------------------------------------------------------
ActNormImpl::ActNormImpl(int64_t channels, bool ddi) : initialized_(!ddi) {
  logs = register_parameter("logs", torch::zeros({1, channels, 1}));
  bias = register_parameter("bias", torch::zeros({1, channels, 1}));
}

void ActNormImpl::initialize(const torch::Tensor& x, const torch::Tensor& x_mask) {
  torch::NoGradGuard no_grad;
  auto denom = x_mask.sum(at::IntArrayRef{0, 2});
  auto m = (x * x_mask).sum(at::IntArrayRef{0, 2}) / denom;
  auto m_sq = (x * x * x_mask).sum(at::IntArrayRef{0, 2}) / denom;
  auto v = m_sq - m * m;
  auto s = 0.5 * torch::log(torch::clamp_min(v, 1e-6));
  bias.copy_((-m * torch::exp(-s)).view(bias.sizes()));
  logs.copy_((-s).view(logs.sizes()));
}

std::pair<torch::Tensor, torch::Tensor> ActNormImpl::forward(const torch::Tensor& x, const torch::Tensor& x_mask,
                                                             const torch::Tensor&, bool reverse) {
  if (!initialized_) {
    initialize(x, x_mask);
    initialized_ = true;
  }
  if (reverse) return {actnorm_reverse(x, logs, bias, x_mask), torch::Tensor()};
  auto y = actnorm_affine(x, logs, bias, x_mask);
  if (frame_log_det_deferred_) return {y, torch::Tensor()};  // the decoder adds it (FrameLogDets)
  return {y, logs.sum() * x_mask.sum({1, 2})};
}

// ---------------------------------------------------------------------------------------------
InvConvNearImpl::InvConvNearImpl(int64_t channels, int64_t n_split) : channels_(channels), n_split_(n_split) {
  TORCH_CHECK(n_split % 2 == 0, "InvConvNear: n_split must be even");
  auto w = std::get<0>(torch::linalg_qr(torch::randn({n_split, n_split})));
  if (torch::det(w).item<double>() < 0) w.select(1, 0).mul_(-1);
  weight = register_parameter("weight", w.contiguous());
}

namespace {

// x [F, m]'s columns `index` [k], where column j is picked at positions[j] (positions [m, r]:
// each column equally often). The backward sums each column's picks in that fixed order, where
// index_select's backward adds them with atomics on a GPU: other bits from run to run.
class FixedPicks : public torch::autograd::Function<FixedPicks> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& index, const torch::Tensor& positions) {
    ctx->save_for_backward({positions});
    return x.index_select(1, index);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto positions = ctx->get_saved_variables()[0];
    const auto& grad = grads[0];
    const auto picked = grad.index_select(1, positions.reshape({-1}));
    return {picked.view({grad.size(0), positions.size(0), positions.size(1)}).sum(2), {}, {}};
  }
};

}  // namespace

torch::Tensor LeibnizLogDet::operator()(const torch::Tensor& w) {
  const int64_t n = w.size(-1);
  TORCH_CHECK(w.dim() >= 2 && w.size(-2) == n && n >= 1 && n <= kMaxOrder, "LeibnizLogDet: needs [..., n, n] with n <= ",
              kMaxOrder, ", got ", w.sizes());
  if (!index_.defined() || index_.device() != w.device() || sign_.scalar_type() != w.scalar_type() ||
      sign_.size(0) * n != index_.size(0)) {
    std::vector<int64_t> p(n), index;
    std::vector<double> sign;
    std::iota(p.begin(), p.end(), 0);
    do {
      int64_t inversions = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = i + 1; j < n; ++j) inversions += p[i] > p[j];
        index.push_back(i * n + p[i]);
      }
      sign.push_back(inversions % 2 ? -1.0 : 1.0);
    } while (std::next_permutation(p.begin(), p.end()));
    // Where each entry is picked: every entry (i, c) in the (n - 1)! permutations with p(i) = c.
    std::vector<std::vector<int64_t>> picks(n * n);
    for (size_t k = 0; k < index.size(); ++k) picks[index[k]].push_back(static_cast<int64_t>(k));
    std::vector<int64_t> positions;
    for (const auto& p_of_entry : picks) positions.insert(positions.end(), p_of_entry.begin(), p_of_entry.end());
    index_ = torch::tensor(index, torch::kLong).to(w.device());
    positions_ = torch::tensor(positions, torch::kLong).view({n * n, -1}).to(w.device());
    sign_ = torch::tensor(sign, torch::kDouble).to(w.scalar_type()).to(w.device());
  }
  const int64_t terms = sign_.size(0);
  const auto batch = w.sizes().slice(0, w.dim() - 2);
  const auto flat = w.reshape({-1, n * n});
  // unbind, not select: the backward of an unbind is one stack, a select's a fill and a copy.
  const auto factors = FixedPicks::apply(flat, index_, positions_).view({flat.size(0), terms, n}).unbind(2);
  auto products = factors[0];
  for (int64_t i = 1; i < n; ++i) products = products * factors[i];
  return torch::log((products * sign_).sum(1)).view(batch);
}

torch::Tensor InvConvNearImpl::log_det_weight() {
  return n_split_ > LeibnizLogDet::kMaxOrder ? torch::logdet(weight) : log_det_(weight);
}

void InvConvNearImpl::set_inference_cache(bool on) {
  cache_ = on;
  if (on) return;
  inverse_ = torch::Tensor();
  inverse_of_ = nullptr;
}

torch::Tensor InvConvNearImpl::inverse_weight() {
  const bool cacheable = cache_ && !torch::GradMode::is_enabled();
  if (cacheable && inverse_.defined() && inverse_of_ == weight.data_ptr() && inverse_version_ == weight._version() &&
      inverse_.device() == weight.device()) {
    return inverse_;
  }
  // On the host, in float64: an n_split x n_split inverse costs nothing there, where on a GPU
  // torch::inverse needs a cuSOLVER handle, whose creation failed (CUSOLVER_STATUS_INTERNAL_ERROR)
  // at a validation sample when five trainings shared one H100. The copy back is once per weight.
  auto w = torch::inverse(weight.to(torch::kCPU, torch::kDouble)).to(weight.device(), weight.scalar_type());
  if (cacheable) {
    inverse_ = w;
    inverse_of_ = weight.data_ptr();
    inverse_version_ = weight._version();
  }
  return w;
}

std::pair<torch::Tensor, torch::Tensor> InvConvNearImpl::forward(const torch::Tensor& x_in, const torch::Tensor& x_mask,
                                                                 const torch::Tensor&, bool reverse) {
  const int64_t c = x_in.size(1), s = n_split_;
  TORCH_CHECK(c % s == 0, "InvConvNear: channels ", c, " not divisible by n_split ", s);
  if (reverse) return {invconv_mix(x_in, inverse_weight(), x_mask), torch::Tensor()};
  auto y = invconv_mix(x_in, weight, x_mask);
  if (frame_log_det_deferred_) {  // the decoder adds it (FrameLogDets), counting channels_
    TORCH_CHECK(c == channels_, "InvConvNear: ", c, " channels where the decoder counted ", channels_);
    return {y, torch::Tensor()};
  }
  return {y, log_det_weight() * (static_cast<double>(c) / s) * x_mask.sum({1, 2})};
}

// ---------------------------------------------------------------------------------------------
CouplingBlockImpl::CouplingBlockImpl(int64_t in_channels, int64_t hidden_channels, int64_t kernel_size,
                                     int64_t dilation_rate, int64_t n_layers, int64_t gin_channels,
                                     double p_dropout, bool sigmoid_scale)
    : in_channels_(in_channels), sigmoid_scale_(sigmoid_scale) {
  start = register_module("start", WeightNormConv1d(in_channels / 2, hidden_channels, 1));
  end = register_module("end", torch::nn::Conv1d(torch::nn::Conv1dOptions(hidden_channels, in_channels, 1)));
  {
    torch::NoGradGuard no_grad;
    end->weight.zero_();
    end->bias.zero_();
  }
  wn = register_module("wn", WN(hidden_channels, kernel_size, dilation_rate, n_layers, gin_channels, p_dropout));
}

std::pair<torch::Tensor, torch::Tensor> CouplingBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& x_mask,
                                                                   const torch::Tensor& g, bool reverse) {
  const int64_t half = in_channels_ / 2;
#ifdef MONOFLOW_HAS_CUDA
  // GPU training through the fused transform: x_0's rows and x as one op (flow_fused_cuda.h).
  if (!reverse && !sigmoid_scale_ && cuda::fused_coupling_input_applies(x, x_mask)) {
    const bool autocast = at::autocast::is_autocast_enabled(at::kCUDA);
    const auto [time_rows, x_whole] =
        cuda::coupling_input(x, autocast ? at::autocast::get_autocast_dtype(at::kCUDA) : x.scalar_type());
    const auto mask = x_mask.unsqueeze(2);
    const auto start_out = masked_sum({}, start->forward_without_bias(time_rows), start->bias, mask, autocast);
    const auto h = wn->forward(start_out.out, mask, g, start_out.out_low);
    const auto out = conv_over_time(h, end->weight, {}).squeeze(2);
    TORCH_CHECK(cuda::fused_coupling_applies(x_whole, out, end->bias, x_mask),
                "CouplingBlock: the fused coupling transform does not apply to the network's output");
    return cuda::coupling_affine(x_whole, out, end->bias, x_mask);
  }
#endif
  const auto halves = x.split(half, 1);  // split, not slice: see gated_activation_reference
  const auto& x_0 = halves[0];
  const auto& x_1 = halves[1];
  // On a GPU the coupling network runs on [B, C, 1, T] ChannelsLast tensors (wn_fused.h says
  // why); m and logs come back as [B, C, T] views.
  const auto time_rows = to_time_rows(x_0);
  const auto mask = time_rows.dim() == 4 ? x_mask.unsqueeze(2) : x_mask;
  torch::Tensor out;
  if (time_rows.dim() == 3) {
    const auto h = masked_sum({}, start->forward(time_rows), {}, mask).out;
    out = wn->forward_projected(h, mask, g, end->weight, end->bias);  // wn then end, or folded
  } else {
    // The start's bias and mask as one kernel each way, which also writes the rows in the
    // convolutions' dtype under autocast for the WN's first in_layer.
    const bool autocast = at::autocast::is_autocast_enabled(at::kCUDA);
    const auto start_out = masked_sum({}, start->forward_without_bias(time_rows), start->bias, mask, autocast);
    const auto h = wn->forward(start_out.out, mask, g, start_out.out_low);
    out = conv_over_time(h, end->weight, end->bias).squeeze(2);
  }
  const auto m_and_logs = out.split(half, 1);
  const auto& m = m_and_logs[0];
  auto logs = m_and_logs[1];
  if (sigmoid_scale_) logs = torch::log(1e-6 + torch::sigmoid(logs + 2));
  if (reverse) return {coupling_reverse(x, sigmoid_scale_ ? torch::cat({m, logs}, 1) : out, x_mask), torch::Tensor()};
  // CPU training: the transform and its log-determinant as one op each way (flow_train_cpu.h).
  if (!sigmoid_scale_ && cpu::coupling_train_applies(x, out, x_mask)) return cpu::coupling_affine_train(x, out, x_mask);
  auto z_1 = (m + torch::exp(logs) * x_1) * x_mask;
  return {torch::cat({x_0, z_1}, 1), (logs * x_mask).sum({1, 2})};
}

void cache_inference_weights(torch::nn::Module& model, bool on) {
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* conv = m->as<WeightNormConv1dImpl>()) conv->set_inference_cache(on);
    if (auto* flow = m->as<InvConvNearImpl>()) flow->set_inference_cache(on);
  }
}

}  // namespace monoflow::models
