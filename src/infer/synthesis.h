// Text -> mel -> waveform (Griffin-Lim, or a TorchScript neural vocoder) from a checkpoint, for
// tools/synthesize and the quick-start. The model is built from the checkpoint's config snapshot,
// or from a config file given with it (which an official Glow-TTS checkpoint needs).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"

namespace monoflow::train {

// Bounds (docs/reliability.md): what synthesize() refuses with a UserError naming the flag.
constexpr double kMaxLengthScale = 10.0;       // --length-scale in (0, kMaxLengthScale]
constexpr double kMaxNoiseScale = 10.0;        // --noise-scale in [0, kMaxNoiseScale]
constexpr int kMaxGriffinLimIterations = 10000;
constexpr int64_t kDefaultMaxFrames = 30000;   // ~6 min at 22050 Hz, hop 256
constexpr int64_t kSpeakerLater = -2;          // SynthesisOptions::speaker: set per call (monoflow.Synthesizer)

struct SynthesisOptions {
  // A monoflow ckpt_*.pt, or an official Glow-TTS file (G_*.pth: Python torch.save), which
  // needs `config`.
  std::string checkpoint;
  // A YAML config (configs/ljspeech.yaml, ...) describing the model and the text front-end:
  // required for an official checkpoint; for a monoflow one it replaces the config snapshot the
  // checkpoint carries (which may name paths of another machine). "" for the snapshot.
  std::string config;
  // key=value overrides of that config (--set data.cmudict_path=...), applied as train's --set
  // applies them.
  std::vector<std::string> overrides;
  std::string text;
  std::string device = "auto";
  double noise_scale = 0.667;
  double length_scale = 1.0;
  int griffin_lim_iterations = 32;
  int64_t seed = 1234;
  // Speaker id of a multi-speaker model (data.n_speakers > 1): required there, in
  // [0, n_speakers); -1 (none) for a single-speaker model; kSpeakerLater: Synthesizer::set_speaker
  // gives it before the first text (checked then).
  int64_t speaker = -1;
  // A TorchScript vocoder (.ts/.pt from torch.jit.save) instead of Griffin-Lim; "" for Griffin-Lim.
  std::string vocoder;
  // Refuse, before the decoder runs, a text whose predicted durations add up to more frames.
  int64_t max_frames = kDefaultMaxFrames;
};

struct SynthesisResult {
  torch::Tensor mel;        // [n_mels, frames] (CPU)
  torch::Tensor alignment;  // [tokens, frames] (CPU)
  torch::Tensor audio;      // 1-D (CPU): Griffin-Lim's peak-normalised to 0.9, a vocoder's clipped to [-1, 1]
  int sample_rate = 22050;
  int64_t step = 0;         // the checkpoint's step
  std::string unknown_report;  // characters of the text without a symbol, dropped ("" if none)
  std::vector<std::string> tokens;  // the symbols said, one per row of `alignment` ("<blank>" for a blank)
};

// The UserError of a text whose predicted length is over SynthesisOptions::max_frames (serve
// answers it with 413, other UserErrors with 400).
class FrameBudgetError : public UserError {
 public:
  using UserError::UserError;
};

// UserError for options out of bounds, a missing, superfluous or out-of-range --speaker, a
// text with nothing to say (no token that is spoken:
// only spaces, punctuation, or characters outside the symbol set) and a predicted length over
// options.max_frames; FileError for the checkpoint.
SynthesisResult synthesize(const SynthesisOptions& options);

// One text to say and the name its errors carry ("--text", or "FILE:LINE").
struct Utterance {
  std::string text, what;
  // A speaker of a multi-speaker model for this text; kOptionsSpeaker: the Synthesizer's
  // (options.speaker, or set_speaker's). With options.speaker kSpeakerLater and no set_speaker,
  // a multi-speaker model needs every text to name its own (serve's requests do).
  static constexpr int64_t kOptionsSpeaker = -3;
  int64_t speaker = kOptionsSpeaker;
  // The position k its prior noise is drawn for (below); -1: its index in say_all's texts.
  // serve gives every request position 0, so that a text sounds the same in any batch.
  int64_t noise_position = -1;
};

// A checkpoint loaded once for many texts (synthesize --text-file); options.text is not used.
//
// say_all() runs the texts in batches of up to batch_size, longest (in tokens) first so that a
// batch's texts pad little: encoder, durations and the decoder's reverse pass once per batch,
// with each text's padding masked, then each mel cut to its own length and given to the
// vocoder (Griffin-Lim, or --vocoder one mel at a time). On a GPU the encoder, the prior and
// the decoder replay CUDA graphs per (batch, 16-token / 64-frame bucket) shape from the
// shape's second batch on (GraphedInference).
//
// Noise: the k-th text draws its prior noise from its own CPU generator seeded with
// splitmix64(options.seed, k), on the host, whatever the batch it runs in. So the output of a
// text depends on the seed and its position k only: not on batch_size, on the other texts, or
// on the device (up to float rounding: the batch changes the summation order of float32
// reductions, ~1e-7 of the mel's range; a predicted duration within that of a whole frame may
// round up the other way and move the length by n_sqz frames). say(text) is text k = 0 of a
// batch of one: the same as synthesize() with that text, and as the first line of a
// --text-file with the same seed.
//
// Errors: UserError naming `what` for a text with nothing to say or a speaker out of range
// (all texts are checked before the first batch runs), FrameBudgetError for one over
// options.max_frames (checked per batch, before its decoder runs; earlier batches are done by then).
class Synthesizer {
 public:
  explicit Synthesizer(const SynthesisOptions& options);
  ~Synthesizer();
  Synthesizer(const Synthesizer&) = delete;
  Synthesizer& operator=(const Synthesizer&) = delete;
  SynthesisResult say(const std::string& text, const std::string& what = "--text");
  // The mel and alignment only (no vocoder): the result's audio is undefined (monoflow's
  // Python Synthesizer.mel).
  SynthesisResult say_mel(const std::string& text, const std::string& what = "--text");
  // The speaker of the texts said from now on (options.speaker at first), checked as
  // options.speaker is: UserError for one out of range, or any for a single-speaker model (-1: none).
  void set_speaker(int64_t speaker);

  // What a client of the model needs to know (serve's /api/info).
  int n_speakers() const;  // data.n_speakers: 0 or 1 for a single-speaker model
  int sample_rate() const;
  int hop_length() const;
  int n_mels() const;
  int64_t step() const;  // the checkpoint's

  // done(k, result of texts[k]) for every text, in the order the batches run (not texts').
  using Done = std::function<void(size_t, SynthesisResult&&)>;
  void say_all(const std::vector<Utterance>& texts, int batch_size, const Done& done);

 private:
  void say_batch(const std::vector<Utterance>& texts, const std::vector<std::vector<int64_t>>& ids,
                 const std::vector<std::string>& unknown, const std::vector<size_t>& batch, bool audio,
                 const Done& done);
  void say_all(const std::vector<Utterance>& texts, int batch_size, bool audio, const Done& done);
  struct Loaded;
  std::unique_ptr<Loaded> loaded_;
};

// One utterance of a --text-file: the name of its outputs, its text, and where it stands.
struct TextFileLine {
  std::string id, text;
  int line = 0;
};

// The lines of a --text-file: "text" (named by its line number, 0001, 0002, ...) or
// "id|...|text" (the first field names it, the last is said, so an LJSpeech metadata.csv works
// as it is). Blank lines and lines starting with # are skipped, a UTF-8 BOM is dropped.
// FileError for an unreadable file; UserError naming FILE:LINE for an id that is empty, holds a
// '/', or appears twice, and for a file with nothing to say.
std::vector<TextFileLine> read_text_file(const std::string& path);

}  // namespace monoflow::train
