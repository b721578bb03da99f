// preprocess: computes the mel of every utterance of a dataset into the feature cache, on all
// cores, with a progress bar; prints the throughput in seconds of audio per second.
//   preprocess --dataset-dir data/monoflow-corpus --cache-dir runs/x/cache [--jobs N]
#include <algorithm>
#include <cstdio>
#include <thread>

#include "cli_main.h"
#include "data/cache_fill.h"
#include "data/datasets.h"

namespace {

void draw(size_t done, size_t total, double audio_s, double elapsed) {
  const int width = 30;
  const int fill = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu  %.0f s audio/s ", fill,
               "##############################", width - fill, "", done, total,
               elapsed > 0 ? audio_s / elapsed : 0.0);
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  namespace data = monoflow::data;
  data::DataOptions o;
  o.validation_size = 0;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool force = false, no_noise = false;
  CLI::App app{"Fill the monoflow feature cache (mel spectrograms) for a dataset"};
  app.add_option("--dataset-dir", o.dataset_dir, "LJSpeech-layout folder (metadata.csv + wavs/)");
  app.add_option("--training-files", o.training_files, "filelist path|text (or path|speaker|text)");
  app.add_option("--validation-files", o.validation_files, "second filelist, also cached");
  app.add_option("--cache-dir", o.cache_dir, "feature cache folder (the trainer's data.cache_dir)")->required();
  app.add_option("-j,--jobs", jobs, "worker threads (default: all cores)")->check(CLI::PositiveNumber);
  app.add_option("--n-speakers", o.n_speakers, "> 1: filelists are path|speaker|text");
  app.add_option("--on-bad-line", o.on_bad_line, "skip | error")->check(CLI::IsMember({"skip", "error"}));
  app.add_option("--on-rate-mismatch", o.on_rate_mismatch, "resample | error")
      ->check(CLI::IsMember({"resample", "error"}));
  app.add_option("--max-mel-frames", o.max_mel_frames, "longer utterances are left out (0: no limit)");
  app.add_option("--sampling-rate", o.sampling_rate);
  app.add_option("--filter-length", o.filter_length);
  app.add_option("--hop-length", o.hop_length);
  app.add_option("--win-length", o.win_length);
  app.add_option("--n-mel-channels", o.n_mel_channels);
  app.add_option("--mel-fmin", o.mel_fmin);
  app.add_option("--mel-fmax", o.mel_fmax);
  app.add_option("--max-wav-value", o.max_wav_value);
  app.add_flag("--no-add-noise", no_noise, "features without dither (data.add_noise: false)");
  app.add_flag("--force", force, "recompute entries that are already cached");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("preprocess").blank_line(), [&] {
    o.add_noise = !no_noise;
    const auto sets = data::load_datasets(o, nullptr);  // text is not needed for features
    data::CacheFillOptions fill;
    fill.jobs = jobs;
    fill.force = force;
    fill.on_progress = [&](const data::CacheFillProgress& p) {
      draw(p.done, p.total, p.audio_samples / static_cast<double>(o.sampling_rate), p.elapsed_s);
    };
    const auto r = data::fill_feature_cache({sets.train.get(), sets.validation.get()}, fill);
    draw(r.utterances, r.utterances, r.audio_seconds, r.elapsed_s);
    std::fprintf(stderr,
                 "\npreprocess: %zu utterances, %.1f s of audio in %.2f s with %d thread(s): "
                 "%.1f s of audio per second (%zu computed, %zu already cached)\n",
                 r.utterances, r.audio_seconds, r.elapsed_s, jobs, r.audio_seconds / std::max(r.elapsed_s, 1e-9),
                 r.computed, r.utterances - r.computed);
    return 0;
  });
}
