// monoflow.Synthesizer: a checkpoint loaded once (src/infer/synthesis.h), texts said one at a
// time. The model runs with the GIL released; results cross as torch.Tensor without copies.
#include <mutex>
#include <optional>

#include "bindings.h"
#include "infer/synthesis.h"

namespace monoflow::python {
namespace {

using train::SynthesisOptions;
using train::SynthesisResult;

// The C++ Synthesizer and the speaker given at construction (None: each call gives it).
class Synthesizer {
 public:
  Synthesizer(SynthesisOptions options, std::optional<int64_t> speaker) : speaker_(speaker) {
    options.speaker = speaker ? *speaker : train::kSpeakerLater;
    py::gil_scoped_release release;
    synthesizer_ = std::make_unique<train::Synthesizer>(options);
  }

  SynthesisResult say(const std::string& text, std::optional<int64_t> speaker, bool audio) {
    const std::optional<int64_t> chosen = speaker ? speaker : speaker_;
    py::gil_scoped_release release;
    // One text at a time: the speaker and the vocoder switch are the C++ Synthesizer's state, and
    // Python threads may share this object now that the GIL is released.
    std::lock_guard<std::mutex> lock(mutex_);
    synthesizer_->set_speaker(chosen ? *chosen : -1);  // a multi-speaker model without one says which to give
    return audio ? synthesizer_->say(text, "text") : synthesizer_->say_mel(text, "text");
  }

 private:
  std::optional<int64_t> speaker_;
  std::mutex mutex_;
  std::unique_ptr<train::Synthesizer> synthesizer_;
};

}  // namespace

void bind_synthesis(py::module_& m) {
  py::class_<SynthesisResult>(m, "SynthesisResult", "What one text became (Synthesizer.synthesize).")
      .def_readonly("mel", &SynthesisResult::mel, "log-mel, float32 [n_mels, frames]")
      .def_readonly("alignment", &SynthesisResult::alignment, "predicted durations as a path, [tokens, frames]")
      .def_readonly("audio", &SynthesisResult::audio, "1-D float32 waveform")
      .def_readonly("sample_rate", &SynthesisResult::sample_rate)
      .def_readonly("step", &SynthesisResult::step, "the checkpoint's training step")
      .def_readonly("unknown_report", &SynthesisResult::unknown_report,
                    "characters of the text without a symbol, dropped ('' if none)");

  py::class_<Synthesizer>(m, "Synthesizer")
      .def(py::init([](const std::string& checkpoint, std::optional<std::string> config, const std::string& device,
                       std::optional<std::string> vocoder, std::vector<std::string> overrides,
                       std::optional<int64_t> speaker, double noise_scale, double length_scale,
                       int griffin_lim_iters, int64_t seed, int64_t max_frames) {
             SynthesisOptions o;
             o.checkpoint = checkpoint;
             o.config = config.value_or("");
             o.device = device;
             o.vocoder = vocoder.value_or("");
             o.overrides = std::move(overrides);
             o.noise_scale = noise_scale;
             o.length_scale = length_scale;
             o.griffin_lim_iterations = griffin_lim_iters;
             o.seed = seed;
             o.max_frames = max_frames;
             return std::make_unique<Synthesizer>(o, speaker);
           }),
           py::arg("checkpoint"), py::arg("config") = py::none(), py::arg("device") = "cpu",
           py::arg("vocoder") = py::none(), py::kw_only(), py::arg("overrides") = std::vector<std::string>{},
           py::arg("speaker") = py::none(), py::arg("noise_scale") = SynthesisOptions{}.noise_scale,
           py::arg("length_scale") = SynthesisOptions{}.length_scale,
           py::arg("griffin_lim_iters") = SynthesisOptions{}.griffin_lim_iterations,
           py::arg("seed") = SynthesisOptions{}.seed, py::arg("max_frames") = train::kDefaultMaxFrames)
      .def(
          "synthesize",
          [](Synthesizer& s, const std::string& text, std::optional<int64_t> speaker) {
            return s.say(text, speaker, /*audio=*/true);
          },
          py::arg("text"), py::arg("speaker") = py::none())
      .def(
          "tts",
          [](Synthesizer& s, const std::string& text, std::optional<int64_t> speaker) {
            SynthesisResult r = s.say(text, speaker, /*audio=*/true);
            return py::make_tuple(r.audio, r.sample_rate);
          },
          py::arg("text"), py::arg("speaker") = py::none())
      .def(
          "mel",
          [](Synthesizer& s, const std::string& text, std::optional<int64_t> speaker) {
            return s.say(text, speaker, /*audio=*/false).mel;
          },
          py::arg("text"), py::arg("speaker") = py::none());
}

}  // namespace monoflow::python
