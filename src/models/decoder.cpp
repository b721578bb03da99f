#include "models/decoder.h"

namespace monoflow::models {

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

std::pair<torch::Tensor, torch::Tensor> FlowSpecDecoderImpl::forward(const torch::Tensor& x_in,
                                                                     const torch::Tensor& mask_in,
                                                                     const torch::Tensor& g, bool reverse) {
  torch::Tensor x = x_in, x_mask = mask_in;
  if (n_sqz_ > 1) std::tie(x, x_mask) = squeeze(x, x_mask, n_sqz_);
  torch::Tensor logdet_tot;
  if (!reverse) {
    logdet_tot = torch::zeros({x.size(0)}, x.options());
    for (auto& f : flow_ptrs_) {
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
