// The run configuration: YAML sections mapped onto typed structs. The train / data / model
// sections carry the fields of the official Glow-TTS configs/base.json with the same names and
// defaults; fields marked "ours" are monoflow's additions. The run section is ours entirely.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace monoflow::train {

struct TrainSection {
  bool use_cuda = true;
  int log_interval = 20;
  int64_t seed = 1234;
  int epochs = 10000;
  double learning_rate = 1.0;
  std::array<double, 2> betas{0.9, 0.98};
  double eps = 1e-9;
  int warmup_steps = 4000;
  std::string scheduler = "noam";  // noam | constant
  int batch_size = 32;
  bool ddi = true;
  bool fp16_run = true;  // the official mixed-precision switch: bf16 autocast on a GPU here
  // ours
  double grad_clip_value = 5.0;    // the official trainer clips gradient values at 5
  int64_t max_steps = 0;           // 0: run for `epochs`
  int val_interval = 1000;         // steps between validations (0: never)
  int checkpoint_interval = 1000;  // steps between checkpoints
  int keep_checkpoints = 5;        // newest K kept
  int max_nonfinite_steps = 10;    // stop after this many non-finite losses in a row
  bool allow_tf32 = true;
};

struct DataSection {
  bool load_mel_from_disk = false;
  std::string training_files;    // filelist (path|text or path|speaker|text); empty: use dataset_dir
  std::string validation_files;  // filelist; empty: seeded split of the training data
  std::vector<std::string> text_cleaners{"english_cleaners"};
  double max_wav_value = 32768.0;
  int sampling_rate = 22050;
  int filter_length = 1024;
  int hop_length = 256;
  int win_length = 1024;
  int n_mel_channels = 80;
  double mel_fmin = 0.0;
  double mel_fmax = 8000.0;
  bool add_noise = true;
  bool add_space = false;
  bool add_blank = false;
  std::string cmudict_path;  // empty: no CMUdict
  int n_speakers = 0;
  // ours
  std::string dataset_dir;            // LJSpeech layout: metadata.csv + wavs/
  std::string symbols = "english";    // english (the original 148 symbols) | ipa (espeak-ng phonemes)
  std::string espeak_voice = "en-us"; // ipa only: an espeak-ng voice or language
  std::string on_unknown_char = "skip";  // skip (drop, count, report once) | error
  int validation_size = 100;          // utterances held out by the seeded split
  std::string on_bad_line = "skip";   // skip (warn and count) | error
  std::string on_rate_mismatch = "resample";  // resample (soxr) | error
  std::string cache_dir;              // empty: <run dir>/cache
  int num_workers = 2;                // loader threads
  int prefetch_batches = 4;
  int max_mel_frames = 1000;          // longer utterances are skipped (0: no limit)
};

struct ModelSection {
  int hidden_channels = 192;
  int filter_channels = 768;
  int filter_channels_dp = 256;
  int kernel_size = 3;
  double p_dropout = 0.1;
  int n_blocks_dec = 12;
  int n_layers_enc = 6;
  int n_heads = 2;
  double p_dropout_dec = 0.05;
  int dilation_rate = 1;
  int kernel_size_dec = 5;
  int n_block_layers = 4;
  int n_sqz = 2;
  bool prenet = true;
  bool mean_only = true;
  int hidden_channels_enc = 192;
  int hidden_channels_dec = 192;
  int window_size = 4;
  // ours, with the official FlowGenerator's constructor defaults
  int n_split = 4;
  bool sigmoid_scale = false;
  int block_length = 0;  // 0: none
  int gin_channels = 0;  // speaker embedding size when data.n_speakers > 1
};

struct RunSection {
  std::string dir = "runs/ljspeech";     // checkpoints, logs, config snapshot
  std::string device = "auto";           // auto | cpu | cuda | cuda:N
  std::string align_backend = "auto";    // auto | cpu | cuda | cuda-fast
  bool compare_align = false;            // run every backend each step and check they agree
  double mas_neg_inf = -1e32;            // the neg-infinity stand-in of MAS
  bool tensorboard = true;
  int image_interval = 0;                // steps between alignment images (0: at validation)
  bool cuda_graphs = true;               // GPU (one process or data-parallel): replay the step as CUDA graphs
};

struct Config {
  TrainSection train;
  DataSection data;
  ModelSection model;
  RunSection run;
  std::string source;  // the file it was read from, for messages
  // Where each explicitly set key came from ("file.yaml:12" or "--set"), for messages.
  std::map<std::string, std::string> origin;
};

}  // namespace monoflow::train
