#include "train/synth/synthesis.h"

#include "common/error.h"
#include "data/mel.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/synth/griffin_lim.h"
#include "train/config/options_map.h"

namespace monoflow::train {

SynthesisResult synthesize(const SynthesisOptions& o) {
  const CheckpointState state = read_checkpoint_state(o.checkpoint);
  if (state.config_yaml.empty()) {
    throw FileError(o.checkpoint, 0, "the checkpoint carries no config snapshot; it was not written by train");
  }
  const Config c = parse_config(state.config_yaml, o.checkpoint + " (config snapshot)");
  const torch::Device device = resolve_device(o.device);

  const text::TextProcessor tp(text_options(c));
  const std::vector<int64_t> ids = tp.encode(o.text);
  if (ids.empty()) throw UserError("--text: nothing to say after cleaning '" + o.text + "'");

  torch::manual_seed(static_cast<uint64_t>(o.seed));
  models::GlowTTS model(model_options(c, static_cast<int64_t>(tp.vocab_size())));
  model->to(device);
  load_checkpoint(o.checkpoint, *model, nullptr);
  model->set_ddi(false);
  model->eval();

  torch::NoGradGuard no_grad;
  const auto text = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);
  const auto lengths = torch::tensor({static_cast<int64_t>(ids.size())}, torch::kInt64).to(device);
  const auto out = model->infer(text, lengths, {}, o.noise_scale, o.length_scale);
  const int64_t frames = out.y_lengths[0].item<int64_t>();

  SynthesisResult r;
  r.step = state.step;
  r.sample_rate = c.data.sampling_rate;
  r.mel = out.y[0].slice(1, 0, frames).to(torch::kCPU, torch::kFloat32);
  r.alignment = out.attn[0].slice(1, 0, frames).to(torch::kCPU, torch::kFloat32);
  GriffinLimOptions gl;
  gl.n_fft = c.data.filter_length;
  gl.hop_length = c.data.hop_length;
  gl.win_length = c.data.win_length;
  gl.iterations = o.griffin_lim_iterations;
  gl.seed = static_cast<uint64_t>(o.seed);
  const auto basis = data::mel_filterbank(c.data.sampling_rate, c.data.filter_length, c.data.n_mel_channels,
                                          c.data.mel_fmin, c.data.mel_fmax);
  const torch::Tensor audio = griffin_lim(mel_to_magnitude(r.mel, basis), gl);
  const double peak = audio.abs().max().item<double>();
  r.audio = peak > 0 ? audio * (0.9 / peak) : audio;
  return r;
}

}  // namespace monoflow::train
