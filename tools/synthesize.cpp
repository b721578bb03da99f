// synthesize: text -> wav (Griffin-Lim) with a trained checkpoint; optionally PNGs of the mel
// and of the alignment. Everything it does lives in src/train/synth/; its bounds (length
// scale, frame budget, a text with nothing to say) are checked there.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli_main.h"
#include "train/log/image.h"
#include "train/synth/synthesis.h"
#include "train/synth/wav.h"

int main(int argc, char** argv) {
  CLI::App app{"Synthesize speech from text with a monoflow checkpoint (Griffin-Lim vocoder)."};
  monoflow::train::SynthesisOptions o;
  std::string out = "out.wav", mel_png, align_png;
  app.add_option("--checkpoint", o.checkpoint, "checkpoint (runs/<name>/checkpoints/ckpt_*.pt)")->required();
  app.add_option("--text", o.text, "what to say")->required();
  app.add_option("--out,-o", out, "output wav");
  app.add_option("--mel-png", mel_png, "also write the generated mel as a PNG");
  app.add_option("--align-png", align_png, "also write the alignment as a PNG");
  app.add_option("--device", o.device, "auto, cpu, cuda or cuda:N");
  app.add_option("--noise-scale", o.noise_scale, "prior noise scale (0.667)");
  app.add_option("--length-scale", o.length_scale, "speaking-rate scale (1.0; larger is slower; at most 10)");
  app.add_option("--griffin-lim-iters", o.griffin_lim_iterations, "Griffin-Lim iterations (32)");
  app.add_option("--seed", o.seed, "seed of the prior noise and the initial phases");
  app.add_option("--max-frames", o.max_frames,
                 "refuse a text predicted to need more mel frames (30000, ~6 min at 22050 Hz)");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("synthesize"), [&] {
    const auto r = monoflow::train::synthesize(o);
    if (!r.unknown_report.empty()) std::fprintf(stderr, "warning: %s\n", r.unknown_report.c_str());
    monoflow::train::write_file(out, monoflow::train::encode_wav16(r.audio, r.sample_rate));
    if (!mel_png.empty()) monoflow::train::write_file(mel_png, monoflow::train::render_heatmap(r.mel).bytes);
    if (!align_png.empty()) monoflow::train::write_file(align_png, monoflow::train::render_heatmap(r.alignment, 240).bytes);
    std::fprintf(stderr, "wrote %s: %.2f s of audio (%lld mel frames, checkpoint step %lld)\n", out.c_str(),
                 static_cast<double>(r.audio.numel()) / r.sample_rate, static_cast<long long>(r.mel.size(1)),
                 static_cast<long long>(r.step));
    return 0;
  });
}
