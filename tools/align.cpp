// align: forced alignment of a dataset with a trained checkpoint: per utterance the durations
// (frames per token, JSON and .npy), a Praat TextGrid (word and token tiers) and optionally the
// MAS path as a PNG; one summary.tsv. Everything it does lives in src/infer/align_export/.
//   align --checkpoint runs/quickstart/checkpoints/ckpt_000004000.pt --dataset-dir data/monoflow-corpus --out aligned
// With several --checkpoint (runs of one text front-end), each token boundary is their median; runs
// of several frame grids (hop, window) are combined word edge by word edge in seconds.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "cli_main.h"
#include "infer/align_export/aligner.h"

namespace {

std::string recentring(const monoflow::train::AlignOptions& o, const monoflow::train::AlignReport& r) {
  char text[160];
  if (!o.recentre) return "as MAS placed them";
  // Recentring may split touching words by another rule than --junction (word_tier_junction).
  const monoflow::train::Junction used = monoflow::train::word_tier_junction(o);
  const std::string rule =
      used == o.junction ? "" : std::string("; touching words split by --junction ") + monoflow::train::junction_name(used);
  if (r.recentred_ms == 0) {
    std::snprintf(text, sizeof text, "not recentred (%lld word junctions; the offset could not be told)%s",
                  static_cast<long long>(r.junctions), rule.c_str());
  } else {
    std::snprintf(text, sizeof text, "recentred: boundaries moved %.1f ms %s (from %lld word junctions)%s",
                  std::abs(r.recentred_ms), r.recentred_ms > 0 ? "earlier" : "later", static_cast<long long>(r.junctions),
                  rule.c_str());
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Align a dataset with a monoflow checkpoint: durations, TextGrids and MAS images per utterance."};
  monoflow::train::AlignOptions o;
  bool quiet = false;
  app.add_option("--checkpoint", o.checkpoints,
                 "checkpoint (runs/<name>/checkpoints/ckpt_*.pt, or an official Glow-TTS G_*.pth with --config); "
                 "repeat it with other runs (same text front-end) to take each boundary's median over them: in "
                 "frames where every run has one frame grid (data.hop_length, data.win_length, ...), else each word "
                 "edge in seconds, each run on its own mels; durations then use the first checkpoint's frames")
      ->required();
  app.add_option("--dataset-dir", o.dataset_dir,
                 "LJSpeech-layout folder (metadata.csv + wavs/); with --filelist, the base of its relative paths");
  app.add_option("--filelist", o.filelist, "a filelist (path|text, or path|speaker|text) instead of metadata.csv");
  app.add_option("--out,-o", o.out_dir, "output folder")->required();
  app.add_option("--config", o.config, "config to use instead of each checkpoint's snapshot, for all of them (same model section)");
  app.add_option("--set", o.overrides, "config override key=value (e.g. data.on_bad_line=error)");
  app.add_option("--device", o.device, "auto, cpu, cuda or cuda:N (MAS: cuda-fast on a GPU, cpu on the CPU)");
  app.add_option("--batch-size", o.batch_size, "utterances per forward pass")
      ->check(CLI::PositiveNumber)
      ->default_str("train.batch_size");
  app.add_option("--cache-dir", o.cache_dir, "feature cache")->default_str("data.cache_dir (the run's cache)");
  app.add_option("--min-pause-ms", o.min_pause_ms,
                 "a gap between two words this long or longer is a pause interval; shorter ones are split");
  std::string junction = monoflow::train::junction_name(o.junction);
  app.add_option("--junction", junction,
                 "where two words meet when the frames between them (the space token, punctuation) are too few "
                 "for a pause: centre (their exact middle, half a frame into the middle one when they are an odd "
                 "count, as a single space frame is: no rounding to the frame grid), middle (split at their middle, "
                 "rounded down to a frame: half a frame earlier than centre at an odd count; better against "
                 "espeak-ng's word events and Festival's segments, worse against flite's) or next (they are the "
                 "next word's onset: the boundary is where they begin). "
                 "Each voice's references set words apart at their own place: docs/accuracy.md \"Touching words "
                 "at the exact middle\"")
      ->check(CLI::IsMember(monoflow::train::junction_names()))
      ->capture_default_str();
  app.add_option("--silence-edge-ms", o.silence_edge_ms,
                 "move the first word's start after a leading silence and the last word's end before the "
                 "trailing silence this far into the word, for the mel window's reach (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->default_str("half of data.win_length: 23.2 ms at 1024 samples and 22050 Hz");
  app.add_flag("--recentre,!--no-recentre", o.recentre,
               "move the TextGrids' boundaries by the run's offset that the spectral change at word junctions "
               "tells. Off by default: its constant (the change peaks 1.29 frames after a boundary) was "
               "calibrated on espeak-ng's en-us word events of the default corpus with touching words split by "
               "--junction middle, which it then uses in place of centre; on another voice it becomes a bias of "
               "its own (docs/accuracy.md, \"Alignment accuracy\")");
  app.add_flag("--images", o.images, "also write the MAS path of each utterance as a PNG");
  app.add_flag("--quiet,-q", quiet, "no progress line");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("align").blank_line(), [&] {
    o.progress = !quiet;
    o.junction = *monoflow::train::junction_named(junction);  // CLI::IsMember checked the name
    const auto r = monoflow::train::align_dataset(o);
    std::fprintf(stderr,
                 "align: %lld utterances (%.1f s of audio, %lld words) in %.1f s on %s (MAS %s); %lld bad line(s) "
                 "skipped; mean mle %.4f%s\n  TextGrids %s\n  wrote %s/{durations,textgrids%s}/ and %s\n",
                 static_cast<long long>(r.utterances), r.audio_seconds, static_cast<long long>(r.words), r.elapsed_s,
                 r.device.c_str(), r.backend.c_str(), static_cast<long long>(r.bad_lines), r.mean_mle,
                 r.word_label_fallbacks > 0
                     ? (", " + std::to_string(r.word_label_fallbacks) + " with word labels from tokens").c_str()
                     : "",
                 recentring(o, r).c_str(), o.out_dir.c_str(), o.images ? ",images" : "", r.summary_path.c_str());
    return 0;
  });
}
