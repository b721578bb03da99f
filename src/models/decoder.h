// The flow decoder of Glow-TTS (official models.FlowSpecDecoder): squeeze by n_sqz, then
// n_blocks x (ActNorm, InvConvNear, CouplingBlock) as one flat list `flows`, then unsqueeze.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "models/modules.h"
#include "models/options.h"

namespace monoflow::models {

class FlowSpecDecoderImpl : public torch::nn::Module {
 public:
  explicit FlowSpecDecoderImpl(const GlowTTSOptions& options);
  // Forward (mel -> latent): returns (z, logdet [B]), the sum over all flows.
  // Reverse (latent -> mel): returns (y, undefined). x: [B, out_channels, T], x_mask [B,1,T];
  // T is truncated to a multiple of n_sqz. g: [B, gin, 1] or undefined.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& x_mask,
                                                  const torch::Tensor& g = {}, bool reverse = false);
  const std::vector<std::shared_ptr<Flow>>& flow_list() const { return flow_ptrs_; }
  void set_ddi(bool ddi);

 private:
  int64_t n_sqz_;
  LeibnizLogDet log_det_;  // the InvConvNear flows' log-determinants, all at once (decoder.cpp)
  torch::nn::ModuleList flows;
  std::vector<std::shared_ptr<Flow>> flow_ptrs_;
};
TORCH_MODULE(FlowSpecDecoder);

}  // namespace monoflow::models
