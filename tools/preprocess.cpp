// preprocess: computes the mel of every utterance of a dataset into the feature cache, on all
// cores, with a progress bar; prints the throughput in seconds of audio per second. Its data
// settings (mel recipe, filelists, bad-line policy, ...) are a run config's data section, the one
// the trainer reads, so that the cache it fills is the one training finds:
//   preprocess --config configs/quickstart.yaml [--set data.hop_length=200 ...] [--jobs N]
//   preprocess --dataset-dir data/monoflow-corpus --cache-dir runs/x/cache   (default settings)
// --npy-out DIR also writes what training reads, for another trainer or a vocoder: DIR/<id>.npy,
// each utterance's mel as float32 [n_mels, frames] (the official Glow-TTS reads these with
// data.load_mel_from_disk), and DIR/tokens.tsv, "id<TAB>token ids" per utterance.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli_main.h"
#include "common/contained_path.h"
#include "data/cache_fill.h"
#include "data/datasets.h"
#include "data/text_encoder.h"
#include "infer/npy.h"
#include "train/atomic_file.h"
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

// Writes each utterance's mel and tokens as training reads them (see the top of this file).
size_t export_features(const std::vector<const monoflow::data::TtsDataset*>& sets, const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::string tokens = "id\ttokens\n";
  size_t n = 0;
  for (const auto* set : sets) {
    if (!set) continue;
    for (size_t i = 0; i < set->size(); ++i) {
      const monoflow::data::Sample s = set->get(i, 0);  // from the cache just filled
      // Inside --npy-out, whatever the id holds (the manifest refused ids that are paths already).
      monoflow::train::write_file_atomically(monoflow::child_path(dir, s.id, ".npy", "--npy-out: utterance id"),
                                             monoflow::train::encode_npy_float32(s.mel));
      tokens += s.id + "\t";
      const torch::Tensor ids = s.text.contiguous();  // int64 (batch.h)
      const int64_t* id = ids.data_ptr<int64_t>();
      for (int64_t t = 0; t < ids.numel(); ++t) tokens += (t ? " " : "") + std::to_string(id[t]);
      tokens += "\n";
      ++n;
    }
  }
  monoflow::train::write_file_atomically(dir + "/tokens.tsv", tokens);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  namespace data = monoflow::data;
  namespace train = monoflow::train;
  std::string config_path, dataset_dir, cache_dir;
  std::vector<std::string> overrides;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool force = false;
  std::string npy_out;
  CLI::App app{"Fill the monoflow feature cache (mel spectrograms) for a dataset"};
  app.add_option("--config,-c", config_path, "YAML config whose data section sets the features")
      ->default_str("none: the defaults");
  app.add_option("--set", overrides, "override a config key: --set data.hop_length=200 (repeatable)");
  app.add_option("--dataset-dir", dataset_dir, "LJSpeech-layout folder (data.dataset_dir)");
  app.add_option("--cache-dir", cache_dir, "feature cache folder (data.cache_dir)")
      ->default_str("<run.dir>/cache");
  app.add_option("-j,--jobs", jobs, "worker threads")
      ->check(CLI::PositiveNumber)
      ->default_str("all cores");
  app.add_flag("--force", force, "recompute entries that are already cached");
  app.add_option("--npy-out", npy_out,
                 "also write each utterance's mel as DIR/<id>.npy (float32 [n_mels, frames]) and its token ids "
                 "in DIR/tokens.tsv, as training reads them");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("preprocess").blank_line(), [&] {
    std::vector<train::FlagOverride> flags;
    if (!dataset_dir.empty()) flags.push_back({"--dataset-dir", "data.dataset_dir=" + dataset_dir});
    if (!cache_dir.empty()) flags.push_back({"--cache-dir", "data.cache_dir=" + cache_dir});
    const train::Config config = config_path.empty() ? train::parse_config("", "defaults", overrides, flags)
                                                     : train::load_config(config_path, overrides, flags);
    data::DataOptions o = train::data_options(config);
    // Every utterance is filled, training or validation alike: no split, so that a small
    // dataset with the default validation_size is not refused here.
    if (o.validation_files.empty()) o.validation_size = 0;
    // The features need no text; the export writes the tokens too.
    std::shared_ptr<const monoflow::text::TextProcessor> text;
    if (!npy_out.empty()) text = std::make_shared<const monoflow::text::TextProcessor>(config.text);
    const auto sets = data::load_datasets(o, text ? data::text_encoder(text) : data::TextEncoder{});
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
    if (!npy_out.empty()) {
      const size_t n = export_features({sets.train.get(), sets.validation.get()}, npy_out);
      std::fprintf(stderr, "preprocess: wrote %zu mels (.npy) and tokens.tsv to %s\n", n, npy_out.c_str());
    }
    return 0;
  });
}
