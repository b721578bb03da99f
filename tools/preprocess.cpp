// preprocess: computes the mel of every utterance of a dataset into the feature cache, on all
// cores, with a progress bar; prints the throughput in seconds of audio per second. Its data
// settings (mel recipe, filelists, bad-line policy, ...) are a run config's data section, the one
// the trainer reads, so that the cache it fills is the one training finds:
//   preprocess --config configs/quickstart.yaml [--set data.hop_length=200 ...] [--jobs N]
//   preprocess --dataset-dir data/monoflow-corpus --cache-dir runs/x/cache   (default settings)
#include <algorithm>
#include <cstdio>
#include <thread>

#include "cli_main.h"
#include "data/cache_fill.h"
#include "data/datasets.h"
#include "train/config/config_io.h"
#include "train/config/library_options.h"

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
  namespace train = monoflow::train;
  std::string config_path, dataset_dir, cache_dir;
  std::vector<std::string> overrides;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool force = false;
  CLI::App app{"Fill the monoflow feature cache (mel spectrograms) for a dataset"};
  app.add_option("--config,-c", config_path, "YAML config whose data section sets the features (default: defaults)");
  app.add_option("--set", overrides, "override a config key: --set data.hop_length=200 (repeatable)");
  app.add_option("--dataset-dir", dataset_dir, "LJSpeech-layout folder (data.dataset_dir)");
  app.add_option("--cache-dir", cache_dir, "feature cache folder (data.cache_dir; default <run.dir>/cache)");
  app.add_option("-j,--jobs", jobs, "worker threads (default: all cores)")->check(CLI::PositiveNumber);
  app.add_flag("--force", force, "recompute entries that are already cached");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("preprocess").blank_line(), [&] {
    if (!dataset_dir.empty()) overrides.push_back("data.dataset_dir=" + dataset_dir);
    if (!cache_dir.empty()) overrides.push_back("data.cache_dir=" + cache_dir);
    const train::Config config = config_path.empty() ? train::parse_config("", "defaults", overrides)
                                                     : train::load_config(config_path, overrides);
    const data::DataOptions o = train::data_options(config);
    const auto sets = data::load_datasets(o, nullptr);  // text is not needed for features
    data::CacheFillOptions fill;
    fill.jobs = jobs;
    fill.force = force;
    fill.on_progress = [&](const data::CacheFillProgress& p) {
      draw(p.done, p.total, p.audio_samples / static_cast<double>(o.mel.sampling_rate), p.elapsed_s);
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
