#include "models/glow_tts.h"

#include <ATen/record_function.h>

#include <cmath>
#include <string>

#include "common/error.h"

namespace monoflow::models {

GlowTTSImpl::GlowTTSImpl(const GlowTTSOptions& options) : options_(options) {
  options_.validate();
  encoder = register_module("encoder", TextEncoder(options_));
  decoder = register_module("decoder", FlowSpecDecoder(options_));
  if (options_.n_speakers() > 1) {
    emb_g = register_module("emb_g", torch::nn::Embedding(options_.n_speakers(), options_.gin_channels()));
    torch::NoGradGuard no_grad;
    emb_g->weight.uniform_(-0.1, 0.1);
  }
}

int64_t GlowTTSImpl::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void GlowTTSImpl::set_ddi(bool ddi) { decoder->set_ddi(ddi); }

bool GlowTTSImpl::ddi_pending() const {
  for (const auto& f : decoder->flow_list()) {
    if (auto* a = dynamic_cast<ActNormImpl*>(f.get()); a && !a->initialized()) return true;
  }
  return false;
}

torch::Tensor GlowTTSImpl::speaker_vector(const torch::Tensor& speakers, int64_t batch) {
  if (!emb_g) {
    if (speakers.defined()) throw UserError("speaker ids given to a single-speaker model (model n_speakers <= 1)");
    return {};
  }
  if (!speakers.defined()) {
    throw UserError("this model has " + std::to_string(options_.n_speakers()) +
                    " speakers: every batch needs speaker ids");
  }
  if (speakers.dim() != 1 || speakers.size(0) != batch) throw UserError("speaker ids must be a [B] tensor");
  // Ids still on the host are range-checked here for free. Ids already on the GPU are not:
  // reading them back would stall every step (and break graph capture); the data loaders
  // reject out-of-range speakers with file:line when they read the filelist.
  if (!speakers.is_cuda()) {
    const auto lo = speakers.min().item<int64_t>(), hi = speakers.max().item<int64_t>();
    if (lo < 0 || hi >= options_.n_speakers()) {
      throw UserError("speaker id " + std::to_string(lo < 0 ? lo : hi) + " outside [0, " +
                      std::to_string(options_.n_speakers()) + ")");
    }
  }
  auto ids = speakers.to(emb_g->weight.device(), torch::kLong);
  namespace F = torch::nn::functional;
  return F::normalize(emb_g->forward(ids), F::NormalizeFuncOptions().dim(1)).unsqueeze(-1);  // [B, gin, 1]
}

torch::Tensor compute_logp(const torch::Tensor& x_m_in, const torch::Tensor& x_logs_in, const torch::Tensor& z_in) {
  torch::NoGradGuard no_grad;
  // MAS needs float32 log-likelihoods: under bf16 autocast the matmuls below would otherwise
  // run in bf16, and near-ties in logp would then flip paths between this and any recomputation.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto dtype = x_m_in.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  auto x_m = x_m_in.to(dtype), x_logs = x_logs_in.to(dtype), z = z_in.to(dtype);
  auto x_s_sq_r = torch::exp(-2 * x_logs);
  if (!x_m.is_cuda()) {
    // On the CPU the four terms below as one batched product, the two token-only terms folded
    // into a row of the left factor against a row of ones: [r; m r; c]^T [-z^2 / 2; z; 1] with
    // r = exp(-2 logs). The official form's two products and three broadcast additions over
    // [b, t, s] took 8.5 ms of a batch-8 CPU step, this 4.9 (docs/benchmarks.md, "On the CPU").
    // The GPU keeps the official form, as the graphed step records it.
    auto per_token = (-0.5 * std::log(2 * M_PI) - x_logs - 0.5 * (x_m * x_m) * x_s_sq_r).sum({1}, true);  // [b,1,t]
    auto lhs = torch::cat({x_s_sq_r, x_m * x_s_sq_r, per_token}, 1).transpose(1, 2);  // [b,t,2c+1]
    auto rhs = torch::cat({-0.5 * (z * z), z, torch::ones({z.size(0), 1, z.size(2)}, z.options())}, 1);
    return torch::bmm(lhs, rhs);
  }
  auto logp1 = (-0.5 * std::log(2 * M_PI) - x_logs).sum({1}).unsqueeze(-1);               // [b,t,1]
  auto logp2 = torch::matmul(x_s_sq_r.transpose(1, 2), -0.5 * (z * z));                  // [b,t,s]
  auto logp3 = torch::matmul((x_m * x_s_sq_r).transpose(1, 2), z);                        // [b,t,s]
  auto logp4 = (-0.5 * (x_m * x_m) * x_s_sq_r).sum({1}).unsqueeze(-1);                    // [b,t,1]
  return logp1 + logp2 + logp3 + logp4;
}

torch::Tensor generate_path(const torch::Tensor& duration, const torch::Tensor& mask) {
  const int64_t b = mask.size(0), t_x = mask.size(1), t_y = mask.size(2);
  auto cum = torch::cumsum(duration, 1).reshape({b * t_x});
  auto path = sequence_mask(cum, t_y).to(mask.scalar_type()).view({b, t_x, t_y});
  namespace F = torch::nn::functional;
  path = path - F::pad(path, F::PadFuncOptions({0, 0, 1, 0})).slice(1, 0, t_x);
  return path * mask;
}

torch::Tensor expand_by_durations(const torch::Tensor& x, const torch::Tensor& durations, int64_t frames) {
  TORCH_CHECK(x.dim() == 3 && durations.dim() == 2 && durations.size(0) == x.size(0) &&
                  durations.size(1) == x.size(2),
              "expand_by_durations: x [B, C, T] and durations [B, T], got ", x.sizes(), " and ", durations.sizes());
  const int64_t b = x.size(0), c = x.size(1);
  const auto ends = torch::cumsum(durations.to(x.device(), torch::kLong), 1).contiguous();  // [B, T]
  const auto s = torch::arange(frames, ends.options()).unsqueeze(0).expand({b, frames}).contiguous();
  // The first token whose frames end after s: T (the zero column below) past the last token.
  const auto token = torch::searchsorted(ends, s, /*out_int32=*/false, /*right=*/true);  // [B, S]
  return torch::constant_pad_nd(x, {0, 1}).gather(2, token.unsqueeze(1).expand({b, c, frames}));
}

GlowTTSOutput GlowTTSImpl::forward(const torch::Tensor& text, const torch::Tensor& text_lengths_in,
                                   const torch::Tensor& mel, const torch::Tensor& mel_lengths_in,
                                   const torch::Tensor& speakers, const align::MasOptions& mas) {
  if (text.dim() != 2 || mel.dim() != 3 || mel.size(0) != text.size(0)) {
    throw UserError("GlowTTS::forward: expected text [B,T] and mel [B,n_mels,S] with the same B");
  }
  if (mel.size(1) != options_.out_channels()) {
    throw UserError("GlowTTS::forward: mel has " + std::to_string(mel.size(1)) + " channels, the model " +
                    std::to_string(options_.out_channels()) + " (data.n_mel_channels)");
  }
  const auto device = encoder->parameters().front().device();
  const int64_t n_sqz = options_.n_sqz();
  auto text_lengths = text_lengths_in.to(device, torch::kLong);
  auto g = speaker_vector(speakers, text.size(0));
  // Named scopes for profiles (scripts/profile_summary.py groups kernels by them; backward
  // kernels join the scope of the forward op they differentiate). Free when not profiling.
  EncoderOutput enc;
  {
    RECORD_USER_SCOPE("monoflow::text_encoder");
    enc = encoder->forward(text.to(device), text_lengths, g);
  }

  // preprocess: cut the mel and its lengths to a multiple of n_sqz
  const int64_t y_max = (mel.size(2) / n_sqz) * n_sqz;
  // The model's parameter dtype, not x_m's: under autocast x_m may be bfloat16/half, while
  // the flows take the mel in full precision (autocast lowers it per op).
  const auto dtype = encoder->parameters().front().scalar_type();
  auto y = mel.to(device, dtype).slice(2, 0, y_max);
  auto y_lengths = torch::div(mel_lengths_in.to(device, torch::kLong), n_sqz, "floor") * n_sqz;
  auto z_mask = sequence_mask(y_lengths, y_max).unsqueeze(1).to(dtype);

  GlowTTSOutput out;
  std::tie(out.z, out.logdet) = decoder->forward(y, z_mask, g, /*reverse=*/false);

  RECORD_USER_SCOPE("monoflow::mas_and_prior");
  auto logp = compute_logp(enc.x_m, enc.x_logs, out.z);
  align::MasOptions opts = mas;
  opts.want_path = true;
  opts.want_durations = true;
  opts.path_dtype = torch::kFloat32;
  auto mas_result = align::maximum_path(logp.to(torch::kFloat32), text_lengths, y_lengths, opts);
  auto attn = mas_result.path.to(dtype).detach();  // [B,T,S]

  if (attn.is_cuda()) {  // the original's product, as the graphed step records it
    auto attn_t = attn.transpose(1, 2);  // [B,S,T]
    out.z_m = torch::matmul(attn_t, enc.x_m.transpose(1, 2)).transpose(1, 2);
    out.z_logs = torch::matmul(attn_t, enc.x_logs.transpose(1, 2)).transpose(1, 2);
  } else {
    out.z_m = expand_by_durations(enc.x_m, mas_result.durations, y_max);
    out.z_logs = expand_by_durations(enc.x_logs, mas_result.durations, y_max);
  }
  out.logw_ = torch::log(1e-8 + attn.sum(-1)).unsqueeze(1) * enc.x_mask;
  out.z_mask = z_mask;
  out.x_m = enc.x_m;
  out.x_logs = enc.x_logs;
  out.x_mask = enc.x_mask;
  out.attn = attn;
  out.logw = enc.logw;
  out.durations = mas_result.durations;
  out.y_lengths = y_lengths;
  return out;
}

torch::Tensor inference_durations(const torch::Tensor& logw, const torch::Tensor& x_mask, double length_scale) {
  return torch::ceil(torch::exp(logw) * x_mask * length_scale);
}

torch::Tensor inference_durations(const torch::Tensor& logw, const torch::Tensor& x_mask,
                                  const torch::Tensor& length_scale) {
  return torch::ceil(torch::exp(logw) * x_mask * length_scale.to(x_mask.scalar_type()));
}

InferenceOutput GlowTTSImpl::infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                   const torch::Tensor& speakers, double noise_scale, double length_scale) {
  InferenceOutput out = infer_prior(text, text_lengths, speakers, noise_scale, length_scale);
  out.y = decoder->forward(out.z, out.z_mask, out.g, /*reverse=*/true).first;
  return out;
}

InferenceOutput GlowTTSImpl::infer_prior(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                         const torch::Tensor& speakers, double noise_scale, double length_scale,
                                         int64_t frame_multiple) {
  InferenceOutput out = infer_lengths(text, text_lengths, speakers, length_scale);
  infer_expand(out, noise_scale, frame_multiple);
  return out;
}

InferenceOutput GlowTTSImpl::infer_lengths(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                           const torch::Tensor& speakers, double length_scale) {
  const auto device = encoder->parameters().front().device();
  const auto scale = torch::full({}, length_scale, torch::TensorOptions().device(device).dtype(torch::kFloat64));
  InferenceOutput out = infer_durations(text.to(device), text_lengths.to(device, torch::kLong),
                                        speaker_vector(speakers, text.size(0)), scale);
  out.max_frames = out.y_lengths.max().item<int64_t>();
  return out;
}

InferenceOutput GlowTTSImpl::infer_durations(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                             const torch::Tensor& g, const torch::Tensor& length_scale) {
  const int64_t n_sqz = options_.n_sqz();
  InferenceOutput out;
  out.g = g;
  auto enc = encoder->forward(text, text_lengths, g);
  out.w_ceil = inference_durations(enc.logw, enc.x_mask, length_scale);
  auto y_lengths = torch::clamp_min(out.w_ceil.sum({1, 2}), 1).to(torch::kLong);
  // The original cuts to a multiple of n_sqz, which leaves 0 frames for a 1-frame utterance
  // (and then fails on empty tensors); here such an utterance keeps n_sqz frames.
  out.y_lengths = torch::clamp_min(torch::div(y_lengths, n_sqz, "floor") * n_sqz, n_sqz);
  out.logw = enc.logw;
  out.x_m = enc.x_m;
  out.x_logs = enc.x_logs;
  out.x_mask = enc.x_mask;
  return out;
}

void GlowTTSImpl::infer_expand(InferenceOutput& out, double noise_scale, int64_t frame_multiple,
                               const torch::Tensor& noise_in) {
  TORCH_CHECK(frame_multiple == 1 || (frame_multiple > 1 && frame_multiple % options_.n_sqz() == 0),
              "infer_prior: frame_multiple must be a multiple of n_sqz");
  const int64_t y_max = (out.max_frames + frame_multiple - 1) / frame_multiple * frame_multiple;
  // For the valid frames only, then padded: the same draws with or without a bucket.
  auto noise = prior_noise(out, noise_in, "infer_expand");
  if (y_max > out.max_frames) noise = torch::constant_pad_nd(noise, {0, y_max - out.max_frames});
  expand_prior(out, y_max, noise, torch::full({}, noise_scale, out.x_mask.options()));
}

torch::Tensor prior_noise(const InferenceOutput& out, const torch::Tensor& noise, const char* caller) {
  const std::vector<int64_t> shape{out.x_m.size(0), out.x_m.size(1), out.max_frames};
  TORCH_CHECK(!noise.defined() || noise.sizes() == shape, caller, ": noise must be [B, n_mels, ", out.max_frames,
              "], got ", noise.sizes());
  // In the mask's dtype: the model's (float32 under bf16 autocast too).
  const auto options = out.x_mask.options();
  return noise.defined() ? noise.to(options) : torch::randn(shape, options);
}

void GlowTTSImpl::expand_prior(InferenceOutput& out, int64_t y_max, const torch::Tensor& noise,
                               const torch::Tensor& noise_scale) {
  auto z_mask = sequence_mask(out.y_lengths, y_max).unsqueeze(1).to(out.x_mask.scalar_type());
  auto attn_mask = out.x_mask.unsqueeze(-1) * z_mask.unsqueeze(2);  // [B,1,T,S]
  auto attn = generate_path(out.w_ceil.squeeze(1), attn_mask.squeeze(1));
  auto attn_t = attn.transpose(1, 2);
  out.z_m = torch::matmul(attn_t, out.x_m.transpose(1, 2)).transpose(1, 2);
  out.z_logs = torch::matmul(attn_t, out.x_logs.transpose(1, 2)).transpose(1, 2);
  out.z = (out.z_m + torch::exp(out.z_logs) * noise.to(out.z_m.scalar_type()) * noise_scale) * z_mask;
  out.z_mask = z_mask;
  out.attn = attn;
}

}  // namespace monoflow::models
