// The Glow-TTS generator (official models.FlowGenerator); its losses are in models/losses.h.
//
// Training step (what the trainer calls):
//   models::GlowTTS model(models::GlowTTSOptions(n_vocab, n_mels) /* .hidden_channels(...) ... */);
//   model->set_ddi(true);                 // first forward initialises every ActNorm (DDI)
//   auto out = model->forward(batch.text, batch.text_lengths, batch.mel, batch.mel_lengths,
//                             batch.speakers /* undefined if single-speaker */, mas_options);
//   auto l_mle = models::mle_loss(out.z, out.z_m, out.z_logs, out.logdet, out.z_mask);  // models/losses.h
//   auto l_dur = models::duration_loss(out.logw, out.logw_, batch.text_lengths);
//   (l_mle + l_dur).backward();
// Synthesis:
//   torch::NoGradGuard g; model->eval();
//   auto syn = model->infer(text, text_lengths, speakers, /*noise_scale=*/0.667, /*length_scale=*/1.0);
//   syn.y: [B, n_mels, S] mel frames, valid up to syn.y_lengths.
#pragma once

#include <torch/torch.h>

#include "align/mas.h"
#include "models/decoder.h"
#include "models/encoder.h"
#include "models/options.h"

namespace monoflow::models {

// What forward() returns: the official ((z, z_m, z_logs, logdet, z_mask), (x_m, x_logs,
// x_mask), (attn, logw, logw_)) plus the lengths and durations. S is the mel length cut to a
// multiple of n_sqz; frames beyond it are not modelled (as in the original).
struct GlowTTSOutput {
  torch::Tensor z;          // [B, n_mels, S] latent of the mel
  torch::Tensor z_m;        // [B, n_mels, S] prior mean expanded along the alignment
  torch::Tensor z_logs;     // [B, n_mels, S] prior log-std expanded along the alignment
  torch::Tensor logdet;     // [B] log|det| of the decoder
  torch::Tensor z_mask;     // [B, 1, S]
  torch::Tensor x_m;        // [B, n_mels, T]
  torch::Tensor x_logs;     // [B, n_mels, T]
  torch::Tensor x_mask;     // [B, 1, T]
  torch::Tensor attn;       // [B, T, S] MAS path (0/1) in the model dtype (the original has [B,1,T,S])
  torch::Tensor logw;       // [B, 1, T] predicted log-durations
  torch::Tensor logw_;      // [B, 1, T] log(1e-8 + MAS durations) * x_mask, the duration target
  torch::Tensor durations;  // [B, T] int32 MAS durations (frames per token)
  torch::Tensor y_lengths;  // [B] int64 mel lengths cut to a multiple of n_sqz (the mask's)
};

struct InferenceOutput {
  torch::Tensor y;          // [B, n_mels, S] generated mel
  torch::Tensor y_lengths;  // [B] int64
  int64_t max_frames = 0;   // y_lengths.max(), read once on the host
  torch::Tensor z, g;       // the decoder's input (the sampled prior) and speaker vector
  torch::Tensor z_m, z_logs, z_mask;
  torch::Tensor attn;       // [B, T, S]
  torch::Tensor logw;       // [B, 1, T]
  torch::Tensor w_ceil;     // [B, 1, T] frames per token used
  torch::Tensor x_m, x_logs;  // [B, n_mels, T] the encoder's prior per token
  torch::Tensor x_mask;
};

class GlowTTSImpl : public torch::nn::Module {
 public:
  // Validates the options (monoflow::UserError on a bad value).
  explicit GlowTTSImpl(const GlowTTSOptions& options);

  // text [B,T] int64, text_lengths [B], mel [B,n_mels,S_max], mel_lengths [B], speakers [B]
  // int64 (required iff n_speakers > 1, else leave undefined). MAS runs on logp's device with
  // `mas` (its path_dtype/want_* fields are overridden: path and durations are both needed).
  GlowTTSOutput forward(const torch::Tensor& text, const torch::Tensor& text_lengths, const torch::Tensor& mel,
                        const torch::Tensor& mel_lengths, const torch::Tensor& speakers,
                        const align::MasOptions& mas);

  // Durations from the predictor (ceil(exp(logw) * length_scale)), prior sampled with
  // noise_scale, decoder in reverse. Uses torch's global RNG for the noise.
  InferenceOutput infer(const torch::Tensor& text, const torch::Tensor& text_lengths,
                        const torch::Tensor& speakers = {}, double noise_scale = 1.0, double length_scale = 1.0);

  // infer() up to the decoder: everything but y. With frame_multiple > 1 the frame axis of z,
  // z_mask, z_m, z_logs and attn is padded (masked) up to a multiple of it, so that a caller
  // replaying the decoder as a CUDA graph needs one graph per length bucket; the padding
  // changes no valid frame (every flow is masked). frame_multiple: a multiple of n_sqz.
  InferenceOutput infer_prior(const torch::Tensor& text, const torch::Tensor& text_lengths,
                              const torch::Tensor& speakers = {}, double noise_scale = 1.0,
                              double length_scale = 1.0, int64_t frame_multiple = 1);

  // infer_prior() in its two halves, for a caller that must see the output lengths before the
  // noise is drawn (a frame budget; noise drawn per utterance, infer/synthesis.h):
  // infer_lengths() runs the encoder and the durations (w_ceil, y_lengths, max_frames, logw,
  // x_m, x_logs, x_mask, g); infer_expand() expands the prior along the durations and samples
  // z = (z_m + exp(z_logs) * noise * noise_scale) * z_mask. `noise`: [B, n_mels, max_frames]
  // standard normal draws (any device; zeros past each utterance's length are masked anyway),
  // or undefined to draw them (in x_mask's dtype) from torch's global generator as infer() does.
  InferenceOutput infer_lengths(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                const torch::Tensor& speakers = {}, double length_scale = 1.0);
  void infer_expand(InferenceOutput& out, double noise_scale, int64_t frame_multiple = 1,
                    const torch::Tensor& noise = {});
  // infer_expand() on the device alone, so that a CUDA graph can hold it: the frame axis padded
  // to y_max (>= the longest y_lengths), `noise` [B, n_mels, y_max] draws in x_mask's dtype
  // (anything finite past an utterance's frames: masked), noise_scale a 0-dim tensor of that
  // dtype on the device. infer_expand() draws the noise so and calls this: both give one prior.
  void expand_prior(InferenceOutput& out, int64_t y_max, const torch::Tensor& noise,
                    const torch::Tensor& noise_scale);
  // infer_lengths() on the device alone, so that a CUDA graph can hold it: text and
  // text_lengths on the model's device, g from speaker_vector(), length_scale a 0-dim float64
  // tensor on the device; max_frames is left 0 (reading it is the one host wait).
  InferenceOutput infer_durations(const torch::Tensor& text, const torch::Tensor& text_lengths,
                                  const torch::Tensor& g, const torch::Tensor& length_scale);

  // DDI switch: true makes every ActNorm initialise itself from the next batch it sees.
  void set_ddi(bool ddi);
  bool ddi_pending() const;  // some ActNorm still waits for its data-dependent initialisation

  const GlowTTSOptions& options() const { return options_; }
  int64_t parameter_count() const;

  // The conditioning g [B, gin, 1] of speakers [B] (the normalised embedding), or undefined for
  // a single-speaker model; host ids are range-checked (UserError), device ids are not.
  torch::Tensor speaker_vector(const torch::Tensor& speakers, int64_t batch);

  TextEncoder encoder{nullptr};
  FlowSpecDecoder decoder{nullptr};
  torch::nn::Embedding emb_g{nullptr};

 private:
  GlowTTSOptions options_;
};
TORCH_MODULE(GlowTTS);

// log N(z[:, :, s]; x_m[:, :, t], exp(x_logs[:, :, t])) summed over channels: [B, T, S],
// computed as the original does (four terms), without gradient, in float32 (float64 stays).
torch::Tensor compute_logp(const torch::Tensor& x_m, const torch::Tensor& x_logs, const torch::Tensor& z);

// The prior's noise for infer_expand() and what replays it (infer/graphed_inference.h):
// `noise` as given, in x_mask's dtype and device, or undefined to draw [B, n_mels, max_frames]
// standard normals in x_mask's dtype from torch's global generator. Throws, naming `caller`,
// when a given noise has another shape.
torch::Tensor prior_noise(const InferenceOutput& out, const torch::Tensor& noise, const char* caller);

// Alignment from integer durations: path[b, t, s] = 1 for cumsum(d)[t-1] <= s < cumsum(d)[t],
// times mask [B, T, S] (the original commons.generate_path).
torch::Tensor generate_path(const torch::Tensor& duration, const torch::Tensor& mask);

// x [B, C, T] expanded along durations [B, T] (integer, 0 on padded tokens) to `frames` frames:
// frame s takes the column of the token whose frames hold it, 0 past the last token. The same
// values as matmul(generate_path(...), x) in [B, C, S], as a gather (its gradient a scatter-add):
// the training step's prior expansion on the CPU, where the dense product cost ~4% of a step.
torch::Tensor expand_by_durations(const torch::Tensor& x, const torch::Tensor& durations, int64_t frames);

// Frames per token at inference, the official rule: ceil(exp(logw) * x_mask * length_scale),
// [B, 1, T]. infer() expands the prior with it; callers that must know the output length before
// the decoder runs (a frame budget, a target length) sum it.
torch::Tensor inference_durations(const torch::Tensor& logw, const torch::Tensor& x_mask, double length_scale);
// The same with the scale in a 0-dim device tensor (a graph replays it with any value); equal
// values, since a scalar factor is rounded to the mask's dtype as this tensor is.
torch::Tensor inference_durations(const torch::Tensor& logw, const torch::Tensor& x_mask,
                                  const torch::Tensor& length_scale);

}  // namespace monoflow::models
