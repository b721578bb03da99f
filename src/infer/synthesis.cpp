#include "infer/synthesis.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "common/contained_path.h"
#include "common/error.h"
#include "common/input_file.h"
#include "data/mel.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "models/modules.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "infer/graphed_inference.h"
#include "train/griffin_lim.h"
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

// Frames the decoder will produce for each utterance of a batch, as GlowTTSImpl::infer_lengths
// computes them (ceil of the predicted durations, cut to a multiple of n_sqz), but summed in
// float64 on the host: a diverged duration predictor gives INT64_MAX, not an overflowed cast.
std::vector<int64_t> predicted_frames(const torch::Tensor& w_ceil, int64_t n_sqz) {
  const torch::Tensor sums = w_ceil.sum({1, 2}, false, torch::kFloat64).cpu();
  std::vector<int64_t> frames;
  for (int64_t b = 0; b < sums.size(0); ++b) {
    const double f = sums[b].item<double>();
    frames.push_back(!std::isfinite(f) || f > 1e15 ? INT64_MAX
                                                   : std::max<int64_t>(static_cast<int64_t>(f) / n_sqz * n_sqz, n_sqz));
  }
  return frames;
}

// The seed of the prior noise of a batch's k-th text: splitmix64 of (seed, k). Each utterance
// draws from its own generator, so its noise does not depend on the batch it runs in, on the
// order batches run in, or on the other lines of the file; and the streams of one seed do not
// come back shifted under the next seed, as seed + k would make them.
uint64_t noise_seed(int64_t seed, size_t k) {
  uint64_t z = static_cast<uint64_t>(seed) + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(k) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
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
  const auto gl = GriffinLimOptions(c.data.mel).iterations(o.griffin_lim_iterations).seed(static_cast<uint64_t>(o.seed));
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

// A TorchScript vocoder (a HiFi-GAN-style generator saved with torch.jit.script/trace), loaded
// once per Synthesizer.
torch::jit::script::Module load_vocoder(const std::string& path, const torch::Device& device) {
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
  return vocoder;
}

// The vocoder on one mel [1, n_mels, frames] (one utterance at a time: a batch's padding would
// reach the last samples through the vocoder's receptive field); its waveform ([1, 1, N],
// [1, N] or [N]) clipped to [-1, 1], not normalised: the vocoder sets its own level.
torch::Tensor vocoder_audio(const std::string& path, torch::jit::script::Module& vocoder, const torch::Tensor& mel,
                            const torch::Device& device) {
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
  audio = audio.flatten().to(torch::kCPU, torch::kFloat32);
  // Clipping and the int16 conversion would turn NaN into silence, written with exit code 0.
  if (const int64_t bad = (~torch::isfinite(audio)).sum().item<int64_t>(); bad > 0) {
    throw FileError(path, 0, "the vocoder returned " + std::to_string(bad) + " non-finite (NaN/Inf) sample(s) of " +
                                 std::to_string(audio.numel()) + " for a mel of " + std::to_string(mel.size(1)) +
                                 " frames; check the vocoder (its weights, or the mel scale it expects: monoflow's "
                                 "is the natural log of the mel magnitude)");
  }
  return audio.clamp(-1.0, 1.0);
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
    return load_config(o.config, o.overrides);
  }
  if (!o.config.empty()) return load_config(o.config, o.overrides);
  const CheckpointState state = read_checkpoint_state(o.checkpoint);
  if (state.config_yaml.empty()) {
    throw FileError(o.checkpoint, 0, "the checkpoint carries no config snapshot; it was not written by train; "
                                     "pass --config");
  }
  return parse_config(state.config_yaml, o.checkpoint + " (config snapshot)", o.overrides);
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
  std::optional<torch::jit::script::Module> vocoder;
  // On a GPU the encoder, the prior and the decoder replay CUDA graphs per (batch, 16-token
  // bucket) and (batch, 64-frame bucket), recorded at a shape's second batch: the first runs
  // eagerly (GraphedInference's eager_uses).
  std::unique_ptr<GraphedInference> graphed;
  bool speaker_pending = false;  // options.speaker was kSpeakerLater and set_speaker has not been called

  Loaded(const SynthesisOptions& o, Config c)
      : options(o), config(std::move(c)), device(resolve_device(o.device, "--device")), tp(config.text) {}

  // A text's token ids; UserError naming `what` for a text with nothing to say.
  std::vector<int64_t> tokens(const Utterance& u) {
    tp.reset_unknown();
    std::vector<int64_t> ids = tp.encode(u.text);
    if (std::none_of(ids.begin(), ids.end(), [&](int64_t id) { return tp.spoken(id); })) {
      const std::string unknown = tp.unknown_report();
      throw UserError(u.what + " '" + u.text + "': nothing to say (no letter or phoneme of the symbol set " +
                      config.text.symbols + " after cleaning" + (unknown.empty() ? "" : "; " + unknown) + ")");
    }
    return ids;
  }

  // The speaker of u (its own, or the options'); UserError naming `what` for one that the
  // model has not (the options' was checked when the model was loaded).
  int64_t speaker(const Utterance& u) const {
    const int n = config.data.n_speakers;
    if (u.speaker == Utterance::kOptionsSpeaker) return speakers.defined() ? speakers[0].item<int64_t>() : -1;
    if (n > 1 ? (u.speaker < 0 || u.speaker >= n) : u.speaker >= 0) {
      throw UserError(u.what + ": speaker " + std::to_string(u.speaker) + ": " + options.checkpoint +
                      (n > 1 ? " is a model of " + std::to_string(n) + " speakers (0.." + std::to_string(n - 1) + ")"
                             : " is a single-speaker model"));
    }
    return n > 1 ? u.speaker : -1;
  }
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
  models::cache_inference_weights(*l.model);  // its weights no longer change
  if (o.speaker != kSpeakerLater) l.speakers = speaker_ids(o.speaker, l.config.data.n_speakers, o.checkpoint);
  l.speaker_pending = o.speaker == kSpeakerLater;
  if (!o.vocoder.empty()) l.vocoder = load_vocoder(o.vocoder, l.device);
  if (GraphedInference::supported(l.device)) {
    l.graphed = std::make_unique<GraphedInference>(l.model, GraphedInferenceOptions().eager_uses(1));
  }
}

Synthesizer::~Synthesizer() = default;

SynthesisResult Synthesizer::say(const std::string& text, const std::string& what) {
  SynthesisResult result;
  say_all({{text, what}}, 1, /*audio=*/true, [&](size_t, SynthesisResult&& r) { result = std::move(r); });
  return result;
}

SynthesisResult Synthesizer::say_mel(const std::string& text, const std::string& what) {
  SynthesisResult result;
  say_all({{text, what}}, 1, /*audio=*/false, [&](size_t, SynthesisResult&& r) { result = std::move(r); });
  return result;
}

void Synthesizer::set_speaker(int64_t speaker) {
  loaded_->speakers = speaker_ids(speaker, loaded_->config.data.n_speakers, loaded_->options.checkpoint);
  loaded_->speaker_pending = false;
}

void Synthesizer::say_all(const std::vector<Utterance>& texts, int batch_size, const Done& done) {
  say_all(texts, batch_size, /*audio=*/true, done);
}

void Synthesizer::say_all(const std::vector<Utterance>& texts, int batch_size, bool audio, const Done& done) {
  // kSpeakerLater and no set_speaker: a multi-speaker model refuses a text that names no speaker.
  if (loaded_->speaker_pending &&
      std::any_of(texts.begin(), texts.end(), [](const Utterance& u) { return u.speaker == Utterance::kOptionsSpeaker; })) {
    set_speaker(-1);
  }
  if (batch_size < 1) throw UserError("--batch-size " + std::to_string(batch_size) + ": must be positive");
  Loaded& l = *loaded_;
  // Every text is tokenized first: one with nothing to say stops the run before any output.
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::string> unknown;
  for (const Utterance& u : texts) {
    ids.push_back(l.tokens(u));
    unknown.push_back(l.tp.unknown_report());
    l.speaker(u);
  }
  // Longest first (a batch that does not fit fails at once), so that a batch's texts pad little.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() > ids[b].size(); });
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size)) {
    const std::vector<size_t> batch(order.begin() + static_cast<std::ptrdiff_t>(start),
                                    order.begin() + static_cast<std::ptrdiff_t>(
                                                        std::min(order.size(), start + static_cast<size_t>(batch_size))));
    say_batch(texts, ids, unknown, batch, audio, done);
  }
}

void Synthesizer::say_batch(const std::vector<Utterance>& texts, const std::vector<std::vector<int64_t>>& ids,
                            const std::vector<std::string>& unknown, const std::vector<size_t>& batch, bool audio,
                            const Done& done) {
  Loaded& l = *loaded_;
  const SynthesisOptions& o = l.options;
  const Config& c = l.config;
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(batch.size());
  int64_t t_max = 0;
  for (size_t k : batch) t_max = std::max(t_max, static_cast<int64_t>(ids[k].size()));
  torch::Tensor text = torch::zeros({n, t_max}, torch::kInt64), lengths = torch::empty({n}, torch::kInt64);
  for (int64_t j = 0; j < n; ++j) {
    const auto& t = ids[batch[static_cast<size_t>(j)]];
    text[j].narrow(0, 0, static_cast<int64_t>(t.size())).copy_(torch::tensor(t, torch::kInt64));
    lengths[j] = static_cast<int64_t>(t.size());
  }
  torch::Tensor speakers;
  if (c.data.n_speakers > 1) {
    std::vector<int64_t> each;
    for (size_t k : batch) each.push_back(l.speaker(texts[k]));
    speakers = torch::tensor(each, torch::kInt64);
  }
  // The graphs' outputs (l.graphed) are overwritten by the next batch: this one's are copied
  // to the host before done() sees them.
  models::InferenceOutput out =
      l.graphed ? l.graphed->infer_lengths(text, lengths, speakers, o.length_scale)
                : l.model->infer_lengths(text.to(l.device), lengths.to(l.device), speakers, o.length_scale);

  // The frame budget, per text, before the decoder runs.
  const std::vector<int64_t> frames = predicted_frames(out.w_ceil, l.model->options().n_sqz());
  for (int64_t j = 0; j < n; ++j) {
    const int64_t predicted = frames[static_cast<size_t>(j)];
    if (predicted > o.max_frames) {
      throw FrameBudgetError(texts[batch[static_cast<size_t>(j)]].what + ": the model predicts " + std::to_string(predicted) +
                      " mel frames (" +
                      number(static_cast<double>(predicted) * c.data.mel.hop_length / c.data.mel.sampling_rate) +
                      " s) at --length-scale " + number(o.length_scale) + ", more than --max-frames " +
                      std::to_string(o.max_frames) + "; shorten the text, lower --length-scale or raise --max-frames");
    }
  }

  const torch::Tensor y_lengths = out.y_lengths.cpu();  // = frames, now that none is out of bounds
  // Each text's noise from its own generator (noise_seed), drawn on the host: the same draws
  // in any batch, and on the CPU and a GPU alike. Zeros past a text's frames are masked.
  const int64_t n_mels = l.model->options().out_channels();
  std::vector<torch::Tensor> draws;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t f = y_lengths[j].item<int64_t>();
    torch::Tensor draw = torch::zeros({n_mels, out.max_frames});
    if (o.noise_scale > 0) {
      const Utterance& u = texts[batch[static_cast<size_t>(j)]];
      const size_t position = u.noise_position >= 0 ? static_cast<size_t>(u.noise_position) : batch[static_cast<size_t>(j)];
      at::Generator generator = at::detail::createCPUGenerator(noise_seed(o.seed, position));
      draw.narrow(1, 0, f).copy_(torch::randn({n_mels, f}, generator));
    }
    draws.push_back(draw);
  }
  if (l.graphed) {
    out = l.graphed->decode(std::move(out), o.noise_scale, torch::stack(draws));
  } else {
    l.model->infer_expand(out, o.noise_scale, 1, torch::stack(draws));
    out.y = l.model->decoder->forward(out.z, out.z_mask, out.g, /*reverse=*/true).first;
  }
  const torch::Tensor mels = out.y.to(torch::kCPU, torch::kFloat32), paths = out.attn.to(torch::kCPU, torch::kFloat32);

  for (int64_t j = 0; j < n; ++j) {
    const size_t k = batch[static_cast<size_t>(j)];
    const int64_t f = y_lengths[j].item<int64_t>();
    SynthesisResult r;
    r.step = l.step;
    r.sample_rate = c.data.mel.sampling_rate;
    r.unknown_report = unknown[k];
    r.mel = mels[j].narrow(1, 0, f).clone();
    r.alignment = paths[j].narrow(0, 0, static_cast<int64_t>(ids[k].size())).narrow(1, 0, f).clone();
    for (int64_t id : ids[k]) r.tokens.push_back(l.tp.symbol(id));
    if (audio) {  // the vocoder runs (say_mel: not)
      r.audio = l.vocoder ? vocoder_audio(o.vocoder, *l.vocoder, r.mel, l.device) : griffin_lim_audio(r.mel, c, o);
    }
    done(k, std::move(r));
  }
}

int Synthesizer::n_speakers() const { return loaded_->config.data.n_speakers; }
int Synthesizer::sample_rate() const { return loaded_->config.data.mel.sampling_rate; }
int Synthesizer::hop_length() const { return loaded_->config.data.mel.hop_length; }
int Synthesizer::n_mels() const { return static_cast<int>(loaded_->model->options().out_channels()); }
int64_t Synthesizer::step() const { return loaded_->step; }

SynthesisResult synthesize(const SynthesisOptions& o) { return Synthesizer(o).say(o.text); }

std::vector<TextFileLine> read_text_file(const std::string& path) {
  std::string text;
  if (!read_input_file(path, "--text-file takes a text file, one line to say per line", text)) {
    throw FileError(path, 0, "cannot read this text file");
  }
  std::istringstream in(std::move(text));
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
    if (const std::string why = name_problem(t.id); !why.empty()) {
      throw UserError(path + ":" + std::to_string(number) + ": the id before '|' must be a file name, got '" + t.id +
                      "' (" + why + ")");
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
