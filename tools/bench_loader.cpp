// bench_loader: data-loader throughput (batches per second) on a dataset, as the trainer would
// consume it with nothing else running (an upper bound on the data rate the GPU can be fed).
//   bench_loader --dataset-dir data/monoflow-corpus [--cache-dir DIR] [--workers N] [--batches M]
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli_main.h"
#include "data/datasets.h"
#include "data/loader.h"
#include "data/text_encoder.h"

int main(int argc, char** argv) {
  namespace data = monoflow::data;
  data::DataOptions o;
  o.validation_size = 0;
  data::LoaderOptions lo;
  int batches = 200;
  bool no_noise = false;
  CLI::App app{"Measure the monoflow data loader's throughput"};
  app.add_option("--dataset-dir", o.dataset_dir, "LJSpeech-layout folder")->required();
  app.add_option("--cache-dir", o.cache_dir, "feature cache (empty: mels computed per batch)");
  app.add_option("--batch-size", lo.batch_size);
  app.add_option("--workers", lo.num_workers);
  app.add_option("--prefetch", lo.prefetch_batches);
  app.add_option("--batches", batches, "batches to time (after one warm-up epoch when cached)");
  app.add_flag("--no-add-noise", no_noise);
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("bench_loader"), [&] {
    o.mel.add_noise = !no_noise;
    auto tp = std::make_shared<const monoflow::text::TextProcessor>(monoflow::text::TextOptions{});
    auto sets = data::load_datasets(o, data::text_encoder(tp));
    data::DataLoader loader(sets.train, lo);
    if (!o.cache_dir.empty()) {
      while (loader.next()) {}  // one epoch fills the cache
    }
    int64_t items = 0, frames = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int n = 0; n < batches;) {
      auto b = loader.next();
      if (!b) continue;
      items += b->text.size(0);
      frames += b->mel_lengths.sum().item<int64_t>();
      ++n;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("bench_loader: %d batches of %d (%lld utterances, %.1f s of audio) in %.2f s: %.1f batches/s, "
                "%.0f s of audio/s; workers %d, cache %s\n",
                batches, lo.batch_size, static_cast<long long>(items),
                frames * o.mel.hop_length / double(o.mel.sampling_rate), s, batches / s,
                frames * o.mel.hop_length / double(o.mel.sampling_rate) / s, lo.num_workers,
                o.cache_dir.empty() ? "off" : "warm");
    return 0;
  });
}
