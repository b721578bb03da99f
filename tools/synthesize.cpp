// synthesize: text -> wav (Griffin-Lim) with a trained checkpoint (monoflow's, or an official
// Glow-TTS G_*.pth with --config), or every line of a --text-file -> <id>.wav with the model
// loaded once and the lines run in batches (--batch-size); optionally the mel as .npy
// (for a neural vocoder) and PNGs of the mel and of the alignment; --speaker for a
// multi-speaker model. Everything it does lives in src/infer/; its bounds (length
// scale, frame budget, a text with nothing to say) are checked there.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "cli_main.h"
#include "synthesis_flags.h"
#include "common/contained_path.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "train/log/image.h"
#include "train/log/plot.h"
#include "infer/npy.h"
#include "infer/synthesis.h"
#include "train/wav.h"
#include "train/threads.h"

int main(int argc, char** argv) {
  CLI::App app{"Synthesize speech from text with a monoflow checkpoint (Griffin-Lim, or a TorchScript vocoder)."};
  monoflow::train::SynthesisOptions o;
  std::string out = "out.wav", mel_png, align_png, mel_out, text_file, out_dir = "synth";
  bool mels = false;
  int batch_size = 16;
  monoflow::add_synthesis_flags(app, o);
  auto* text_option = app.add_option("--text", o.text, "what to say");
  auto* file_option = app.add_option(
      "--text-file", text_file,
      "say every line of FILE ('text', or 'id|...|text' as in an LJSpeech metadata.csv): <id>.wav in --out-dir");
  text_option->excludes(file_option);
  app.add_option("--out-dir", out_dir, "with --text-file: the folder of the wavs, created if missing");
  app.add_option("--batch-size", batch_size,
                 "with --text-file: lines synthesized at once, longest first; the output does not depend on it")
      ->check(CLI::PositiveNumber);
  app.add_flag("--mels", mels, "with --text-file: also write each mel as <id>.npy (float32 [n_mels, frames])");
  app.add_option("--out,-o", out, "output wav of --text");
  app.add_option("--mel-out", mel_out,
                 "also write the generated log-mel [n_mels, frames] as float32 .npy, for a neural vocoder");
  app.add_option("--mel-png", mel_png, "also write the generated mel as a PNG");
  app.add_option("--speaker", o.speaker, "speaker id of a multi-speaker model (0 .. n_speakers - 1)")
      ->default_str("none")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--align-png", align_png, "also write the alignment as a PNG");
  app.add_option("--seed", o.seed, "seed of the prior noise and the initial phases");
  app.add_option("--max-frames", o.max_frames,
                 "refuse a text predicted to need more mel frames (30000: ~6 min at 22050 Hz)");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("synthesize"), [&] {
    monoflow::train::set_intra_op_threads(/*requested: automatic*/ 0, /*loader workers*/ 0);
    monoflow::keep_freed_host_memory();  // no page faults on every call's activations (host_memory.h)
    if (text_option->count() == 0 && file_option->count() == 0) throw monoflow::UserError("give --text or --text-file");
    if (file_option->count() > 0) {
      if (!mel_out.empty() || !mel_png.empty() || !align_png.empty()) {
        throw monoflow::UserError("--mel-out, --mel-png and --align-png are for one --text; use --mels with --text-file");
      }
      const auto lines = monoflow::train::read_text_file(text_file);
      std::error_code error;
      std::filesystem::create_directories(out_dir, error);
      if (error) throw monoflow::FileError(out_dir, 0, "cannot create this folder: " + error.message());
      std::vector<monoflow::train::Utterance> texts;
      for (const auto& line : lines) texts.push_back({line.text, text_file + ":" + std::to_string(line.line)});
      monoflow::train::Synthesizer synthesizer(o);
      double seconds = 0;
      synthesizer.say_all(texts, batch_size, [&](size_t k, monoflow::train::SynthesisResult&& r) {
        if (!r.unknown_report.empty()) {
          std::fprintf(stderr, "warning: %s: %s\n", texts[k].what.c_str(), r.unknown_report.c_str());
        }
        // Inside --out-dir, whatever the id holds (read_text_file checked it already).
        const auto in_out_dir = [&](const char* ext) { return monoflow::child_path(out_dir, lines[k].id, ext, "id"); };
        monoflow::train::write_file(in_out_dir(".wav"), monoflow::train::encode_wav16(r.audio, r.sample_rate));
        if (mels) monoflow::train::write_file(in_out_dir(".npy"), monoflow::train::encode_npy_float32(r.mel));
        seconds += static_cast<double>(r.audio.numel()) / r.sample_rate;
      });
      std::fprintf(stderr, "wrote %zu wavs to %s: %.2f s of audio\n", lines.size(), out_dir.c_str(), seconds);
      return 0;
    }
    const auto r = monoflow::train::synthesize(o);
    if (!r.unknown_report.empty()) std::fprintf(stderr, "warning: %s\n", r.unknown_report.c_str());
    monoflow::train::write_file(out, monoflow::train::encode_wav16(r.audio, r.sample_rate));
    if (!mel_out.empty()) monoflow::train::write_file(mel_out, monoflow::train::encode_npy_float32(r.mel));
    if (!mel_png.empty()) monoflow::train::write_file(mel_png, monoflow::train::render_plot(r.mel, {"frame", "mel channel", 0, "generated mel"}).bytes);
    if (!align_png.empty()) monoflow::train::write_file(align_png, monoflow::train::render_plot(r.alignment, {"frame", "token", 240, "alignment (predicted durations)"}).bytes);
    std::fprintf(stderr, "wrote %s: %.2f s of audio (%lld mel frames, checkpoint step %lld)\n", out.c_str(),
                 static_cast<double>(r.audio.numel()) / r.sample_rate, static_cast<long long>(r.mel.size(1)),
                 static_cast<long long>(r.step));
    return 0;
  });
}
