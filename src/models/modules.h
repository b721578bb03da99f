// Building blocks of Glow-TTS, after the official modules.py / attentions.py: channel layer
// norm, the encoder prenet (ConvReluNorm), weight-normalised convolutions, the WaveNet-style
// coupling network (WN), and the three invertible flows of the decoder (ActNorm,
// InvConvNear, CouplingBlock), plus squeeze/unsqueeze and sequence masks.
//
// Tensors are [batch, channels, time]; masks are [batch, 1, time] in the data dtype.
// Parameter and sub-module names equal the official state_dict keys.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace monoflow::models {

// [B] lengths -> [B, max_length] bool, true inside.
torch::Tensor sequence_mask(const torch::Tensor& lengths, int64_t max_length);

// x * mask in x's dtype (a float32 mask on the text side's bf16 activations: text_side_precision.h).
inline torch::Tensor masked(const torch::Tensor& x, const torch::Tensor& mask) {
  return x * mask.to(x.scalar_type());
}

// Squeeze time into channels by n_sqz: [B,C,T] -> [B,C*n_sqz,T/n_sqz] (T truncated to a
// multiple of n_sqz); the mask keeps every n_sqz-th frame's value (the last of each group).
std::pair<torch::Tensor, torch::Tensor> squeeze(const torch::Tensor& x, const torch::Tensor& x_mask, int64_t n_sqz);
// Inverse of squeeze: [B,C,T] -> [B,C/n_sqz,T*n_sqz]; the mask is repeated n_sqz times.
std::pair<torch::Tensor, torch::Tensor> unsqueeze(const torch::Tensor& x, const torch::Tensor& x_mask, int64_t n_sqz);

// Layer norm over the channel dimension (dim 1), eps 1e-4; parameters gamma, beta.
class LayerNormImpl : public torch::nn::Module {
 public:
  explicit LayerNormImpl(int64_t channels, double eps = 1e-4);
  torch::Tensor forward(const torch::Tensor& x);
  // mask * norm(x + residual): a sublayer's residual sum and the sequence mask [B, 1, T] (zeros
  // and ones) in the norm, one kernel each way on the GPU. Either may be undefined (none).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& mask);
  torch::Tensor gamma, beta;

 private:
  double eps_;
};
TORCH_MODULE(LayerNorm);

// The encoder prenet: n_layers x (conv -> layer norm -> relu -> dropout), a zero-initialised
// 1x1 projection and a residual connection.
class ConvReluNormImpl : public torch::nn::Module {
 public:
  ConvReluNormImpl(int64_t in_channels, int64_t hidden_channels, int64_t out_channels,
                   int64_t kernel_size, int64_t n_layers, double p_dropout);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& x_mask);

 private:
  double p_dropout_;
  torch::nn::ModuleList conv_layers, norm_layers;
  torch::nn::Conv1d proj{nullptr};
};
TORCH_MODULE(ConvReluNorm);

// Conv1d with weight normalisation (weight = g * v / ||v||, norm over all but dim 0), stored
// like torch.nn.utils.weight_norm: parameters bias, weight_g [out,1,1], weight_v [out,in,k].
class WeightNormConv1dImpl : public torch::nn::Module {
 public:
  WeightNormConv1dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                       int64_t dilation = 1, int64_t padding = 0);
  torch::Tensor forward(const torch::Tensor& x);
  // The convolution alone, for callers that fuse the bias into a later kernel.
  torch::Tensor forward_without_bias(const torch::Tensor& x);
  torch::Tensor weight() const;  // the effective weight
  // A weight computed elsewhere for the current forward (the decoder's batched weight norm on
  // a GPU: models/weight_norm_cuda.h), used by weight() until reset with an undefined tensor.
  // `grad_aside`: the weight came through cuda::joined_weight, so forward_without_bias may put
  // its gradient on the side stream (models/weight_grads_aside_cuda.h).
  void set_step_weight(torch::Tensor weight, bool grad_aside = false) {
    step_weight_ = std::move(weight);
    step_weight_grad_aside_ = grad_aside && step_weight_.defined();
    step_weight_taken_ = false;
  }
  // CPU inference (grad mode off, CPU weights): the effective weight, for kernel-5 layers its
  // Winograd transform and for 1x1 layers its packed rows (winograd_conv1d.h, rows padded to
  // a multiple of 6). Computed at each call, unless cache_inference_weights is on: then kept
  // while weight_v and weight_g keep their storage and version (load_state_dict bumps it).
  // Undefined where they do not apply: a GPU, grad mode on, another kernel size.
  torch::Tensor inference_weight();
  torch::Tensor inference_winograd_weight();
  torch::Tensor inference_rows_weight();
  void set_inference_cache(bool on);
  int64_t dilation() const { return dilation_; }
  int64_t padding() const { return padding_; }
  torch::Tensor bias, weight_g, weight_v;

 private:
  bool inference_cache_valid() const;
  void take_step_weight();
  int64_t dilation_, padding_;
  torch::Tensor step_weight_;
  bool step_weight_grad_aside_ = false, step_weight_taken_ = false;
  bool cache_ = false;
  torch::Tensor cached_weight_, cached_winograd_, cached_rows_;
  const void* cached_of_[2] = {nullptr, nullptr};
  uint32_t cached_version_[2] = {0, 0};
};
TORCH_MODULE(WeightNormConv1d);

// WaveNet-like non-causal network of the coupling layers: dilated weight-normalised convs,
// gated tanh-sigmoid units, residual and skip 1x1 convs; optional global conditioning g.
class WNImpl : public torch::nn::Module {
 public:
  WNImpl(int64_t hidden_channels, int64_t kernel_size, int64_t dilation_rate, int64_t n_layers,
         int64_t gin_channels = 0, double p_dropout = 0.0);
  // x_low: x in the convolutions' dtype under autocast, where the caller has it (the coupling's
  // start writes it with its masked sum), for the first in_layer; undefined: cast from x. On a
  // GPU under autocast and without g (the fused kernels' path) the output comes in that dtype
  // too (its one reader is the coupling's end product).
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& x_mask, const torch::Tensor& g = {},
                        const torch::Tensor& x_low = {});
  // A 1x1 convolution [P, hidden, 1] (+ bias [P]) of forward's output: the coupling's end. In
  // CPU no-grad inference without speaker conditioning, where every in_layer runs by Winograd,
  // the projection is folded into each layer's skip weights (P W_skip, cached in float64 then
  // rounded): the skip sum is P channels wide and there is no separate product.
  torch::Tensor forward_projected(const torch::Tensor& x, const torch::Tensor& x_mask, const torch::Tensor& g,
                                  const torch::Tensor& proj_weight, const torch::Tensor& proj_bias);

 private:
  // Grad mode off, CPU, float32: cached weights, the in_layers by winograd_conv1d.h where it
  // applies, the residual and skip sums accumulated in place by matrix products (no
  // res_skip temporaries), and the mask products skipped where the mask is all ones.
  bool cpu_inference_applies(const torch::Tensor& x) const;
  torch::Tensor forward_cpu_inference(const torch::Tensor& x, const torch::Tensor& x_mask, const torch::Tensor& g);
  // The res_skip weights with the projection folded in, packed (winograd_rows_weight), and
  // their biases, per layer; valid while the projection keeps its storage and version and each
  // res_skip layer its cached inference weight (held here, so its address is not reused).
  // Without cache_inference_weights a layer's inference weight is new at each call, and so is
  // the fold.
  const std::vector<torch::Tensor>& folded_res_skip(const torch::Tensor& proj_weight);
  std::vector<torch::Tensor> folded_weight_, folded_bias_, folded_from_;
  const void* folded_proj_ = nullptr;
  uint32_t folded_proj_version_ = 0;
  int64_t hidden_channels_, n_layers_;
  double p_dropout_;
  torch::nn::ModuleList in_layers, res_skip_layers;
  WeightNormConv1d cond_layer{nullptr};
};
TORCH_MODULE(WN);

// An invertible flow step. forward returns (z, logdet [B]) for reverse == false and
// (x, undefined) for reverse == true. g: speaker conditioning [B, gin, 1] or undefined.
class Flow : public torch::nn::Module {
 public:
  virtual std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& x_mask,
                                                          const torch::Tensor& g = {}, bool reverse = false) = 0;
  // Set by the decoder around a forward in which it adds this flow's log-determinant itself
  // (decoder.cpp: FrameLogDets): forward then returns an undefined one. Only for flows whose
  // log-determinant is a per-frame constant times the frame count (ActNorm, InvConvNear).
  void set_frame_log_det_deferred(bool deferred) { frame_log_det_deferred_ = deferred; }

 protected:
  bool frame_log_det_deferred_ = false;
};

// Per-channel affine flow with data-dependent initialisation (DDI): when `ddi` is on, the
// first call sets bias/logs so that the (masked) output has zero mean and unit variance.
class ActNormImpl : public Flow {
 public:
  explicit ActNormImpl(int64_t channels, bool ddi = false);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& x_mask,
                                                  const torch::Tensor& g = {}, bool reverse = false) override;
  void set_ddi(bool ddi) { initialized_ = !ddi; }
  bool initialized() const { return initialized_; }
  torch::Tensor logs, bias;  // [1, C, 1]

 private:
  void initialize(const torch::Tensor& x, const torch::Tensor& x_mask);
  bool initialized_;
};
TORCH_MODULE(ActNorm);

// log det of small n x n matrices (n <= kMaxOrder), as torch::logdet (nan for det < 0), by the
// Leibniz formula: det = sum over permutations p of sign(p) * prod_i W[i, p(i)]. Only a gather,
// multiplies and a sum: no LU factorisation, whose CUDA path checks its result on the host,
// so the training step stays free of host synchronisation and can be graph-captured, and its
// gradient is plain arithmetic, summed in a fixed order (the same bits each run on a GPU too).
// n! terms, so for n up to 6 (720). The permutation tables are built on the first call for a
// device and dtype, and kept (they are not parameters).
class LeibnizLogDet {
 public:
  static constexpr int64_t kMaxOrder = 6;
  // w [n, n] -> a scalar, or [F, n, n] -> [F]: one set of kernels for all F matrices.
  torch::Tensor operator()(const torch::Tensor& w);

 private:
  // [n! * n] flat entry indices, [n * n, (n - 1)!] where each entry is picked, [n!] signs in w's dtype
  torch::Tensor index_, positions_, sign_;
};

// Invertible 1x1 convolution over groups of n_split channels (the channels are split in two
// halves and n_split/2 channels of each half are mixed by one n_split x n_split matrix).
class InvConvNearImpl : public Flow {
 public:
  explicit InvConvNearImpl(int64_t channels, int64_t n_split = 4);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& x_mask,
                                                  const torch::Tensor& g = {}, bool reverse = false) override;
  torch::Tensor weight;  // [n_split, n_split], orthogonal with det > 0 at init
  int64_t n_split() const { return n_split_; }
  int64_t channels() const { return channels_; }
  void set_inference_cache(bool on);

 private:
  torch::Tensor log_det_weight();
  torch::Tensor inverse_weight();
  int64_t channels_, n_split_;
  LeibnizLogDet log_det_;
  // W^-1 for the reverse pass without gradient. Under cache_inference_weights it is kept
  // while the weight keeps its storage and version: synthesis inverts it once, not per call,
  // and a CUDA graph of the reverse pass (whose recording runs it once first) holds no copy to
  // the host, where inverse_weight computes it.
  bool cache_ = false;
  torch::Tensor inverse_;
  const void* inverse_of_ = nullptr;
  uint32_t inverse_version_ = 0;
};
TORCH_MODULE(InvConvNear);

// Whether inference keeps weights derived from the parameters between calls: each
// weight-normalised convolution's weight with its Winograd or packed form and the folded skip
// weights (CPU), and each InvConvNear's inverse (every device). On: a promise by the caller that
// the parameters no longer change but through load_state_dict (synthesis, serving, `align`,
// GraphedInference, whose recording needs the inverses in place). Off, the default: computed at
// each call, because a parameter's storage and version counter do not see every update
// (FusedAdam's steps on its flat buffer and CUDA graph replays leave the version as it was): a
// training run that validated from kept weights measured, at every validation, the weights of
// its first forward without gradient (DDI's). Turning it off drops what was kept.
void cache_inference_weights(torch::nn::Module& model, bool on = true);

// Affine coupling: the first half of the channels, through start -> WN -> end (end is
// zero-initialised, so the block starts as the identity), gives mean and log-scale for the
// second half.
class CouplingBlockImpl : public Flow {
 public:
  CouplingBlockImpl(int64_t in_channels, int64_t hidden_channels, int64_t kernel_size,
                    int64_t dilation_rate, int64_t n_layers, int64_t gin_channels = 0,
                    double p_dropout = 0.0, bool sigmoid_scale = false);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& x_mask,
                                                  const torch::Tensor& g = {}, bool reverse = false) override;

 private:
  int64_t in_channels_;
  bool sigmoid_scale_;
  WeightNormConv1d start{nullptr};
  torch::nn::Conv1d end{nullptr};
  WN wn{nullptr};
};
TORCH_MODULE(CouplingBlock);

}  // namespace monoflow::models
