#include "models/decoder.h"

#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>

#ifdef MONOFLOW_HAS_CUDA
#include "models/weight_norm_cuda.h"
#endif

namespace monoflow::models {

namespace {

// On a GPU, the weight-normalised convolutions of each flow get their weights for this forward
// from one batched kernel each way, in the dtype autocast would give them: per convolution,
// weight norm, the cast and cuDNN's layout copy were a kernel each, and as many again
// backward. One batch per flow, not one for the decoder, so that backward frees each flow's
// float32 weight gradients as it goes rather than holding all of them at once. The weights
// are dropped afterwards, so no later call sees stale ones.
class BatchedWeights {
 public:
  BatchedWeights(const std::vector<std::shared_ptr<Flow>>& flows, const torch::Tensor& x) {
#ifdef MONOFLOW_HAS_CUDA
    if (!x.is_cuda()) return;
    const bool autocast = at::autocast::is_autocast_enabled(at::kCUDA);
    const auto dtype = autocast ? at::autocast::get_autocast_dtype(at::kCUDA) : torch::kFloat;
    for (const auto& flow : flows) {
      std::vector<WeightNormConv1dImpl*> convs;
      std::vector<torch::Tensor> vs, gs;
      for (const auto& m : flow->modules(/*include_self=*/false)) {
        if (auto* conv = dynamic_cast<WeightNormConv1dImpl*>(m.get())) {
          convs.push_back(conv);
          vs.push_back(conv->weight_v);
          gs.push_back(conv->weight_g);
        }
      }
      if (convs.empty() || !cuda::batched_weight_norm_applies(vs, gs, dtype)) continue;
      const auto weights = cuda::batched_weight_norm(vs, gs, dtype);
      for (size_t i = 0; i < convs.size(); ++i) {
        convs[i]->set_step_weight(weights[i]);
        convs_.push_back(convs[i]);
      }
    }
#else
    (void)flows;
    (void)x;
#endif
  }
  ~BatchedWeights() {
    for (auto* conv : convs_) conv->set_step_weight({});
  }
  BatchedWeights(const BatchedWeights&) = delete;
  BatchedWeights& operator=(const BatchedWeights&) = delete;

 private:
  std::vector<WeightNormConv1dImpl*> convs_;
};

}  // namespace

FlowSpecDecoderImpl::FlowSpecDecoderImpl(const GlowTTSOptions& o) : n_sqz_(o.n_sqz()) {
  const int64_t channels = o.out_channels() * o.n_sqz();
  flows = register_module("flows", torch::nn::ModuleList());
  for (int64_t b = 0; b < o.n_blocks_dec(); ++b) {
    auto actnorm = std::make_shared<ActNormImpl>(channels);
    auto invconv = std::make_shared<InvConvNearImpl>(channels, o.n_split());
    auto coupling = std::make_shared<CouplingBlockImpl>(channels, o.decoder_channels(), o.kernel_size_dec(),
                                                        o.dilation_rate(), o.n_block_layers(), o.gin_channels(),
                                                        o.p_dropout_dec(), o.sigmoid_scale());
    flows->push_back(actnorm);
    flows->push_back(invconv);
    flows->push_back(coupling);
    flow_ptrs_.push_back(actnorm);
    flow_ptrs_.push_back(invconv);
    flow_ptrs_.push_back(coupling);
  }
}

namespace {

// The log-determinants of every InvConvNear's mixing matrix for one forward, as one batch: the
// Leibniz formula over all their matrices stacked is the same ~10 kernels each way as for one
// matrix (12 flows: ~420 kernels a training step became ~30). Dropped afterwards, like the
// weights above. Only where every matrix has one order within the formula's reach.
class BatchedLogDets {
 public:
  BatchedLogDets(const std::vector<std::shared_ptr<Flow>>& flows, LeibnizLogDet& log_det, bool reverse) {
    if (reverse) return;  // reverse needs no log-determinant
    std::vector<torch::Tensor> weights;
    for (const auto& flow : flows) {
      auto* invconv = dynamic_cast<InvConvNearImpl*>(flow.get());
      if (invconv == nullptr) continue;
      if (invconv->n_split() > LeibnizLogDet::kMaxOrder ||
          (!weights.empty() && (invconv->weight.sizes() != weights[0].sizes() ||
                                invconv->weight.device() != weights[0].device() ||
                                invconv->weight.scalar_type() != weights[0].scalar_type()))) {
        return;
      }
      invconvs_.push_back(invconv);
      weights.push_back(invconv->weight);
    }
    if (invconvs_.size() < 2) {
      invconvs_.clear();
      return;
    }
    const auto log_dets = log_det(torch::stack(weights)).unbind(0);
    for (size_t i = 0; i < invconvs_.size(); ++i) invconvs_[i]->set_step_log_det(log_dets[i]);
  }
  ~BatchedLogDets() {
    for (auto* invconv : invconvs_) invconv->set_step_log_det({});
  }
  BatchedLogDets(const BatchedLogDets&) = delete;
  BatchedLogDets& operator=(const BatchedLogDets&) = delete;

 private:
  std::vector<InvConvNearImpl*> invconvs_;
};

// "monoflow::flow::ActNorm", "...::InvConvNear", "...::CouplingBlock": a profile scope per kind.
std::string flow_scope(const torch::nn::Module& flow) {
  std::string name = flow.name();  // e.g. monoflow::models::ActNormImpl
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos) name = name.substr(colon + 1);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0) name.resize(name.size() - 4);
  return "monoflow::flow::" + name;
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> FlowSpecDecoderImpl::forward(const torch::Tensor& x_in,
                                                                     const torch::Tensor& mask_in,
                                                                     const torch::Tensor& g, bool reverse) {
  const BatchedWeights weights(flow_ptrs_, x_in);
  const BatchedLogDets log_dets(flow_ptrs_, log_det_, reverse);
  torch::Tensor x = x_in, x_mask = mask_in;
  if (n_sqz_ > 1) std::tie(x, x_mask) = squeeze(x, x_mask, n_sqz_);
  torch::Tensor logdet_tot;
  if (!reverse) {
    logdet_tot = torch::zeros({x.size(0)}, x.options());
    for (auto& f : flow_ptrs_) {
      RECORD_USER_SCOPE(flow_scope(*f));  // for profiles: kernels by flow kind
      auto [z, logdet] = f->forward(x, x_mask, g, false);
      x = z;
      logdet_tot = logdet_tot + logdet;
    }
  } else {
    for (auto it = flow_ptrs_.rbegin(); it != flow_ptrs_.rend(); ++it) x = (*it)->forward(x, x_mask, g, true).first;
  }
  if (n_sqz_ > 1) std::tie(x, x_mask) = unsqueeze(x, x_mask, n_sqz_);
  return {x, logdet_tot};
}

void FlowSpecDecoderImpl::set_ddi(bool ddi) {
  for (auto& f : flow_ptrs_) {
    if (auto* a = dynamic_cast<ActNormImpl*>(f.get())) a->set_ddi(ddi);
  }
}

}  // namespace monoflow::models
