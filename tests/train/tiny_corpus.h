// A tiny LJSpeech-layout corpus (metadata.csv + wavs/) and a tiny model config for trainer
// tests: ten short utterances of tones whose pitch follows the letters, so every run is quick.
#pragma once

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"
#include "train/config/config_io.h"
#include "train/log/image.h"
#include "train/signals.h"
#include "train/wav.h"
#include "train/trainer.h"

namespace monoflow::train::testing {

inline void write_tiny_corpus(const std::string& dir) {
  static const char* kTexts[] = {"hello world.",  "a quick test.",  "tiny corpus.", "glow is a flow.",
                                 "one two three.", "monotonic path.", "speech model.", "short line.",
                                 "align me now.",  "last one here."};
  std::filesystem::create_directories(std::filesystem::path(dir) / "wavs");
  std::ofstream meta(std::filesystem::path(dir) / "metadata.csv");
  const int rate = 22050;
  for (int i = 0; i < 10; ++i) {
    const std::string id = "TINY-" + std::to_string(100 + i);
    const std::string text = kTexts[i];
    meta << id << "|" << text << "|" << text << "\n";
    // 40 ms of tone per character, pitch from the letter.
    const int per_char = rate / 25;
    torch::Tensor wave = torch::zeros({static_cast<int64_t>(text.size()) * per_char});
    auto w = wave.accessor<float, 1>();
    for (size_t c = 0; c < text.size(); ++c) {
      const double f = 150.0 + 12.0 * (static_cast<unsigned char>(text[c]) % 32);
      for (int k = 0; k < per_char; ++k) {
        const double t = static_cast<double>(c * per_char + k) / rate;
        w[c * per_char + k] = static_cast<float>(0.3 * std::sin(2 * M_PI * f * t) + 0.1 * std::sin(4 * M_PI * f * t));
      }
    }
    write_file((std::filesystem::path(dir) / "wavs" / (id + ".wav")).string(), encode_wav16(wave, rate));
  }
}

// A small model that trains in well under a second per step on a CPU.
// One tiny corpus per test process, written on first use, in a folder that lives until exit.
inline const std::string& suite_corpus() {
  static TempDir* dir = new TempDir();
  static const std::string path = [] {
    const std::string p = *dir / "corpus";
    write_tiny_corpus(p);
    return p;
  }();
  return path;
}

inline std::string tiny_config_yaml(const std::string& corpus, const std::string& run_dir, int max_steps) {
  return "train:\n"
         "  seed: 1234\n  batch_size: 4\n  learning_rate: 1.0\n  warmup_steps: 20\n  log_interval: 1\n"
         "  val_interval: 3\n  checkpoint_interval: 3\n  max_steps: " + std::to_string(max_steps) + "\n"
         "  fp16_run: false\n  use_cuda: false\n  keep_checkpoints: 3\n"
         "data:\n"
         "  dataset_dir: " + corpus + "\n  validation_size: 2\n  num_workers: 2\n  max_mel_frames: 400\n"
         "  cache_dir: " + corpus + "/cache\n"
         "model:\n"
         "  hidden_channels: 16\n  filter_channels: 32\n  filter_channels_dp: 16\n  n_blocks_dec: 2\n"
         "  n_layers_enc: 1\n  n_heads: 2\n  hidden_channels_enc: 16\n  hidden_channels_dec: 16\n"
         "  n_block_layers: 2\n"
         "run:\n"
         "  dir: " + run_dir + "\n  device: cpu\n  align_backend: cpu\n";
}

inline Config tiny_config(const std::string& corpus, const std::string& run_dir, int max_steps,
                          const std::vector<std::string>& overrides = {}) {
  return parse_config(tiny_config_yaml(corpus, run_dir, max_steps), "tiny.yaml", overrides);
}

// A quiet training run of c (its YAML as the run's config), with a cleared stop request; `o`
// gives the rest (resume, init_from, ...).
inline RunSummary run_with(const Config& c, RunOptions o) {
  o.config_yaml = to_yaml(c);
  o.quiet = true;
  clear_stop_request();
  return train(c, o);
}

inline RunSummary run(const Config& c, const std::string& resume = "", bool force_new = false) {
  RunOptions o;
  o.resume = resume;
  o.force_new = force_new;
  return run_with(c, o);
}

}  // namespace monoflow::train::testing
