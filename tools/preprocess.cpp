// preprocess: computes the mel of every utterance of a dataset into the feature cache, on all
// cores, with a progress bar; prints the throughput in seconds of audio per second.
//   preprocess --dataset-dir data/monoflow-corpus --cache-dir runs/x/cache [--jobs N]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "data/datasets.h"
#include "data/serial_ops.h"

namespace {

using Clock = std::chrono::steady_clock;

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
  CLI11_PARSE(app, argc, argv);
  o.add_noise = !no_noise;

  try {
    const auto sets = data::load_datasets(o, nullptr);  // text is not needed for features
    std::vector<std::pair<const data::TtsDataset*, size_t>> work;
    double total_audio = 0;
    for (const auto* ds : {sets.train.get(), sets.validation.get()}) {
      for (size_t i = 0; i < ds->size(); ++i) work.emplace_back(ds, i);
      total_audio += ds->stats().audio_seconds;
    }
    std::atomic<size_t> next{0}, done{0}, computed{0};
    std::atomic<int64_t> audio_samples{0};
    std::exception_ptr error;
    std::mutex error_mu;
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < jobs; ++t) {
      threads.emplace_back([&] {
        data::SerialTorchOps serial;  // one utterance per thread; no intra-op threads on top
        for (size_t k; (k = next++) < work.size();) {
          const auto& [ds, i] = work[k];
          try {
            const auto* cache = ds->cache();
            if (force) {
              const auto key = cache->key(ds->item(i).utterance.audio_path);
              cache->store(key, ds->compute_mel(i, data::fnv1a64(key)));
              ++computed;
            } else if (ds->ensure_cached(i)) {
              ++computed;
            }
          } catch (...) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (!error) error = std::current_exception();
            next = work.size();
          }
          audio_samples += ds->item(i).samples;
          ++done;
        }
      });
    }
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    while (done < work.size() && !error) {
      draw(done, work.size(), audio_samples / static_cast<double>(o.sampling_rate), elapsed());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
    const double secs = elapsed();
    draw(done, work.size(), total_audio, secs);
    std::fprintf(stderr,
                 "\npreprocess: %zu utterances, %.1f s of audio in %.2f s with %d thread(s): "
                 "%.1f s of audio per second (%zu computed, %zu already cached)\n",
                 work.size(), total_audio, secs, jobs, total_audio / std::max(secs, 1e-9),
                 computed.load(), work.size() - computed.load());
    return 0;
  } catch (const monoflow::UserError& e) {
    std::cerr << "\npreprocess: error: " << e.what() << "\n";
    return 1;
  }
}
