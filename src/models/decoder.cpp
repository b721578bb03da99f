#include "models/decoder.h"

#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>

#ifdef MONOFLOW_HAS_CUDA
#include "models/weight_grads_aside_cuda.h"
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
        // The dilated convolutions' weight gradients run beside the backward chain; their
        // joins are made here, before the first layer, so that autograd runs them last. (The
        // 1x1 products' too measured no faster: docs/benchmarks.md.)
        const bool aside = vs[i].size(2) > 1 && weights[i].requires_grad() && cuda::weight_grads_aside_in_decoder();
        convs[i]->set_step_weight(aside ? cuda::joined_weight(weights[i]) : weights[i], aside);
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

// ActNorm's and InvConvNear's log-determinants are a per-frame constant times each item's frame
// count: the sum of logs; log det W times C / n_split. Each flow computed its own constant, the
// count and their product, ~10 small kernels each way a flow (~35 more for the Leibniz formula
// of W). For one forward, this takes them over: every InvConvNear matrix through the Leibniz
// formula as one batch, the flows told to leave their term out, and after the flows one total,
// (sum of all logs + C / n_split * sum of all log det W) * frame count. Only where every
// InvConvNear has one order within the formula's reach and one channel count; otherwise each
// flow keeps its own.
class FrameLogDets {
 public:
  FrameLogDets(const std::vector<std::shared_ptr<Flow>>& flows, LeibnizLogDet& log_det, bool reverse) {
    if (reverse) return;  // reverse needs no log-determinant
    std::vector<InvConvNearImpl*> invconvs;
    std::vector<torch::Tensor> weights;
    for (const auto& flow : flows) {
      if (auto* actnorm = dynamic_cast<ActNormImpl*>(flow.get())) actnorms_.push_back(actnorm);
      auto* invconv = dynamic_cast<InvConvNearImpl*>(flow.get());
      if (invconv == nullptr) continue;
      if (invconv->n_split() > LeibnizLogDet::kMaxOrder ||
          (!invconvs.empty() && (invconv->weight.sizes() != weights[0].sizes() ||
                                 invconv->weight.device() != weights[0].device() ||
                                 invconv->weight.scalar_type() != weights[0].scalar_type() ||
                                 invconv->channels() != invconvs[0]->channels()))) {
        actnorms_.clear();
        return;
      }
      invconvs.push_back(invconv);
      weights.push_back(invconv->weight);
    }
    if (!invconvs.empty()) {
      log_dets_ = log_det(torch::stack(weights));
      per_matrix_ = static_cast<double>(invconvs[0]->channels()) / static_cast<double>(invconvs[0]->n_split());
    }
    deferred_.assign(actnorms_.begin(), actnorms_.end());
    deferred_.insert(deferred_.end(), invconvs.begin(), invconvs.end());
    for (auto* flow : deferred_) flow->set_frame_log_det_deferred(true);
  }
  ~FrameLogDets() {
    for (auto* flow : deferred_) flow->set_frame_log_det_deferred(false);
  }
  FrameLogDets(const FrameLogDets&) = delete;
  FrameLogDets& operator=(const FrameLogDets&) = delete;

  bool applies() const { return !deferred_.empty(); }

  // The deferred flows' log-determinants [B], after they ran (ActNorm's DDI sets logs in its
  // first forward).
  torch::Tensor total(const torch::Tensor& x_mask) const {
    torch::Tensor per_frame;
    if (!actnorms_.empty()) {
      std::vector<torch::Tensor> logs;
      for (const auto* actnorm : actnorms_) logs.push_back(actnorm->logs.reshape({-1}));
      per_frame = torch::cat(logs).sum();
    }
    if (log_dets_.defined()) {
      const auto invconv = log_dets_.sum() * per_matrix_;
      per_frame = per_frame.defined() ? per_frame + invconv : invconv;
    }
    return per_frame * x_mask.sum({1, 2});
  }

 private:
  std::vector<ActNormImpl*> actnorms_;
  std::vector<Flow*> deferred_;
  torch::Tensor log_dets_;  // [number of InvConvNear flows]
  double per_matrix_ = 0;   // C / n_split
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
  const FrameLogDets frame_log_dets(flow_ptrs_, log_det_, reverse);
  torch::Tensor x = x_in, x_mask = mask_in;
  if (n_sqz_ > 1) std::tie(x, x_mask) = squeeze(x, x_mask, n_sqz_);
  torch::Tensor logdet_tot;
  if (!reverse) {
    const auto add = [&](const torch::Tensor& logdet) {
      logdet_tot = logdet_tot.defined() ? logdet_tot + logdet : logdet;
    };
    for (auto& f : flow_ptrs_) {
      RECORD_USER_SCOPE(flow_scope(*f));  // for profiles: kernels by flow kind
      auto [z, logdet] = f->forward(x, x_mask, g, false);
      x = z;
      if (logdet.defined()) add(logdet);  // undefined: deferred to frame_log_dets
    }
    if (frame_log_dets.applies()) add(frame_log_dets.total(x_mask));
    if (!logdet_tot.defined()) logdet_tot = torch::zeros({x.size(0)}, x.options());
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
