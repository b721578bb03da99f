#include "train/synth/synthesis.h"

#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "common/error.h"
#include "data/mel.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/synth/griffin_lim.h"
#include "train/config/options_map.h"
#include "train/weights_file.h"

namespace monoflow::train {
namespace {

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Checked before the checkpoint is read: a bad flag is the cheapest error.
void check_bounds(const SynthesisOptions& o) {
  if (!(o.length_scale > 0 && o.length_scale <= kMaxLengthScale)) {
    throw UserError("--length-scale " + number(o.length_scale) + ": must be in (0, " + number(kMaxLengthScale) +
                    "] (1 is the trained speaking rate; larger is slower)");
  }
  if (!(o.noise_scale >= 0 && o.noise_scale <= kMaxNoiseScale)) {
    throw UserError("--noise-scale " + number(o.noise_scale) + ": must be in [0, " + number(kMaxNoiseScale) + "]");
  }
  if (o.griffin_lim_iterations < 0 || o.griffin_lim_iterations > kMaxGriffinLimIterations) {
    throw UserError("--griffin-lim-iters " + std::to_string(o.griffin_lim_iterations) + ": must be in [0, " +
                    std::to_string(kMaxGriffinLimIterations) + "]");
  }
  if (o.max_frames <= 0) throw UserError("--max-frames " + std::to_string(o.max_frames) + ": must be positive");
}

// Frames the decoder would produce, as GlowTTSImpl::infer computes them (ceil of the
// predicted durations, cut to a multiple of n_sqz), from the encoder alone.
int64_t predicted_frames(models::GlowTTS& model, const torch::Tensor& text, const torch::Tensor& lengths,
                         const torch::Tensor& speakers, double length_scale) {
  const auto enc = model->encoder->forward(text, lengths, model->speaker_vector(speakers, text.size(0)));
  const double frames =
      models::inference_durations(enc.logw, enc.x_mask, length_scale).sum(torch::kFloat64).item<double>();
  const int64_t n_sqz = model->options().n_sqz();
  if (!std::isfinite(frames) || frames > 1e15) return INT64_MAX;
  return std::max<int64_t>(static_cast<int64_t>(frames) / n_sqz * n_sqz, n_sqz);
}

// The [1] speaker tensor for `speaker` (on the host: the model range-checks host ids), or
// undefined for a single-speaker model; a wrong --speaker is refused naming the range.
torch::Tensor speaker_ids(int64_t speaker, int n_speakers, const std::string& checkpoint) {
  if (n_speakers > 1) {
    if (speaker < 0 || speaker >= n_speakers) {
      throw UserError("--speaker: " + checkpoint + " is a model of " + std::to_string(n_speakers) +
                      " speakers: give --speaker 0.." + std::to_string(n_speakers - 1) +
                      (speaker < 0 ? "" : " (got " + std::to_string(speaker) + ")"));
    }
    return torch::tensor({speaker}, torch::kInt64);
  }
  if (speaker >= 0) {
    throw UserError("--speaker " + std::to_string(speaker) + ": " + checkpoint + " is a single-speaker model");
  }
  return {};
}

// Griffin-Lim from the mel (the default vocoder), peak-normalised to 0.9.
torch::Tensor griffin_lim_audio(const torch::Tensor& mel, const Config& c, const SynthesisOptions& o) {
  GriffinLimOptions gl;
  gl.n_fft = c.data.mel.filter_length;
  gl.hop_length = c.data.mel.hop_length;
  gl.win_length = c.data.mel.win_length;
  gl.iterations = o.griffin_lim_iterations;
  gl.seed = static_cast<uint64_t>(o.seed);
  const auto basis = data::mel_filterbank(c.data.mel.sampling_rate, c.data.mel.filter_length, c.data.mel.n_mel_channels,
                                          c.data.mel.mel_fmin, c.data.mel.mel_fmax);
  torch::Tensor magnitude = mel_to_magnitude(mel, basis);
  // The STFT's reflect padding needs more than n_fft / 2 samples: a very short output (a
  // word at a small length scale) gets silent frames at its end rather than a torch error.
  const int64_t min_frames = c.data.mel.filter_length / (2 * c.data.mel.hop_length) + 2;
  if (magnitude.size(1) < min_frames) magnitude = torch::constant_pad_nd(magnitude, {0, min_frames - magnitude.size(1)});
  const torch::Tensor audio = griffin_lim(magnitude, gl);
  const double peak = audio.abs().max().item<double>();
  return peak > 0 ? audio * (0.9 / peak) : audio;
}

// A TorchScript vocoder (a HiFi-GAN-style generator saved with torch.jit.script/trace) on the
// mel [1, n_mels, frames]; its waveform ([1, 1, N], [1, N] or [N]) clipped to [-1, 1], not
// normalised: the vocoder sets its own level.
torch::Tensor vocoder_audio(const std::string& path, const torch::Tensor& mel, const torch::Device& device) {
  torch::jit::script::Module vocoder;
  try {
    vocoder = torch::jit::load(path, device);
  } catch (const c10::Error& e) {
    throw FileError(path, 0, std::string("cannot load as a TorchScript vocoder (torch.jit.save of a scripted or "
                                         "traced module taking [B, n_mels, frames]): ") + e.what_without_backtrace());
  } catch (const std::exception& e) {  // the TorchScript parser's own error, on a damaged code/ record
    throw FileError(path, 0, std::string("cannot load as a TorchScript vocoder: ") + e.what());
  }
  vocoder.eval();
  torch::Tensor audio;
  try {
    audio = vocoder.forward({mel.unsqueeze(0).to(device)}).toTensor();
  } catch (const c10::Error& e) {
    throw FileError(path, 0, std::string("the vocoder failed on a mel of shape [1, ") + std::to_string(mel.size(0)) +
                                 ", " + std::to_string(mel.size(1)) + "]: " + e.what_without_backtrace());
  }
  if (audio.numel() == 0 || audio.size(0) != 1 || (audio.dim() > 1 && audio.numel() != audio.size(-1))) {
    throw FileError(path, 0, "the vocoder returned a tensor of shape " + c10::str(audio.sizes()) +
                                 "; expected one waveform: [1, 1, N], [1, N] or [N]");
  }
  return audio.flatten().to(torch::kCPU, torch::kFloat32).clamp(-1.0, 1.0);
}

// The config the model is built from: --config when given, else the checkpoint's snapshot
// (an official checkpoint has none).
Config synthesis_config(const SynthesisOptions& o) {
  check_weights_file(o.checkpoint, "--checkpoint");
  if (checkpoint_format(o.checkpoint) == CheckpointFormat::kTorchSave) {
    if (o.config.empty()) {
      throw FileError(o.checkpoint, 0, "an official Glow-TTS checkpoint (a Python torch.save file) carries no config: "
                                       "pass --config with the YAML that describes its model and text front-end "
                                       "(configs/ljspeech.yaml for the official LJSpeech model)");
    }
    return load_config(o.config);
  }
  if (!o.config.empty()) return load_config(o.config);
  const CheckpointState state = read_checkpoint_state(o.checkpoint);
  if (state.config_yaml.empty()) {
    throw FileError(o.checkpoint, 0, "the checkpoint carries no config snapshot; it was not written by train; "
                                     "pass --config");
  }
  return parse_config(state.config_yaml, o.checkpoint + " (config snapshot)");
}

}  // namespace

struct Synthesizer::Loaded {
  SynthesisOptions options;
  Config config;
  torch::Device device;
  text::TextProcessor tp;
  models::GlowTTS model{nullptr};
  int64_t step = 0;
  torch::Tensor speakers;

  Loaded(const SynthesisOptions& o, Config c)
      : options(o), config(std::move(c)), device(resolve_device(o.device)), tp(config.text) {}
};

Synthesizer::Synthesizer(const SynthesisOptions& o) {
  check_bounds(o);
  loaded_ = std::make_unique<Loaded>(o, synthesis_config(o));
  Loaded& l = *loaded_;
  torch::manual_seed(static_cast<uint64_t>(o.seed));
  l.model = models::GlowTTS(model_options(l.config, static_cast<int64_t>(l.tp.vocab_size())));
  l.model->to(l.device);
  l.step = load_model_weights(o.checkpoint, *l.model).step;
  l.model->eval();
  l.speakers = speaker_ids(o.speaker, l.config.data.n_speakers, o.checkpoint);
}

Synthesizer::~Synthesizer() = default;

SynthesisResult Synthesizer::say(const std::string& utterance, const std::string& what) {
  Loaded& l = *loaded_;
  const SynthesisOptions& o = l.options;
  const Config& c = l.config;
  l.tp.reset_unknown();
  const std::vector<int64_t> ids = l.tp.encode(utterance);
  if (std::none_of(ids.begin(), ids.end(), [&](int64_t id) { return l.tp.spoken(id); })) {
    const std::string unknown = l.tp.unknown_report();
    throw UserError(what + " '" + utterance + "': nothing to say (no letter or phoneme of the symbol set " +
                    c.text.symbols + " after cleaning" + (unknown.empty() ? "" : "; " + unknown) + ")");
  }

  torch::NoGradGuard no_grad;
  const auto text = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(l.device);
  const auto lengths = torch::tensor({static_cast<int64_t>(ids.size())}, torch::kInt64).to(l.device);
  const int64_t predicted = predicted_frames(l.model, text, lengths, l.speakers, o.length_scale);
  if (predicted > o.max_frames) {
    throw UserError(what + ": the model predicts " + std::to_string(predicted) + " mel frames (" +
                    number(static_cast<double>(predicted) * c.data.mel.hop_length / c.data.mel.sampling_rate) +
                    " s) at --length-scale " + number(o.length_scale) + ", more than --max-frames " +
                    std::to_string(o.max_frames) + "; shorten the text, lower --length-scale or raise --max-frames");
  }
  const auto out = l.model->infer(text, lengths, l.speakers, o.noise_scale, o.length_scale);
  const int64_t frames = out.y_lengths[0].item<int64_t>();

  SynthesisResult r;
  r.step = l.step;
  r.sample_rate = c.data.mel.sampling_rate;
  r.unknown_report = l.tp.unknown_report();
  r.mel = out.y[0].slice(1, 0, frames).to(torch::kCPU, torch::kFloat32);
  r.alignment = out.attn[0].slice(1, 0, frames).to(torch::kCPU, torch::kFloat32);
  r.audio = o.vocoder.empty() ? griffin_lim_audio(r.mel, c, o) : vocoder_audio(o.vocoder, r.mel, l.device);
  return r;
}

SynthesisResult synthesize(const SynthesisOptions& o) { return Synthesizer(o).say(o.text); }

std::vector<TextFileLine> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path)) throw FileError(path, 0, "cannot read this text file");
  std::vector<TextFileLine> lines;
  std::set<std::string> ids;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 BOM
    if (line.find_first_not_of(" \t") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    TextFileLine t;
    t.line = number;
    const size_t bar = line.find('|');
    if (bar == std::string::npos) {
      char id[16];
      std::snprintf(id, sizeof id, "%04d", number);
      t.id = id;
      t.text = line;
    } else {
      t.id = line.substr(0, bar);
      t.text = line.substr(line.rfind('|') + 1);
    }
    if (t.id.empty() || t.id.find('/') != std::string::npos) {
      throw UserError(path + ":" + std::to_string(number) + ": the id before '|' must be a file name, got '" + t.id + "'");
    }
    if (!ids.insert(t.id).second) {
      throw UserError(path + ":" + std::to_string(number) + ": id '" + t.id + "' appears twice");
    }
    lines.push_back(std::move(t));
  }
  if (lines.empty()) throw UserError(path + ": no line to say (blank lines and # comments are skipped)");
  return lines;
}

}  // namespace monoflow::train
