// The run configuration: YAML sections mapped onto typed structs. The train / data / model
// sections carry the fields of the official Glow-TTS configs/base.json with the same names and
// defaults; fields marked "ours" are monoflow's additions. The run section is ours entirely.
// The data and model sections are the libraries' own option records (plain structs, no
// LibTorch), held as they are: a hyper-parameter is declared once, in its library, and
// config_schema.cpp names its YAML key.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/options.h"
#include "data/text/text_options.h"
#include "models/options.h"

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
  // Under fp16_run, the text encoder and duration predictor in bf16 as well (models/text_side_precision.h).
  bool autocast_text_side = true;
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
  std::string cudnn_search = "auto";     // auto | always | never: when a graphed shape gets cuDNN's search (train/cudnn_search.h)
  int threads = 0;                       // intra-op threads of tensor ops (0: cores less loader workers, <= 8; train/threads.h)
};

struct Config {
  TrainSection train;
  // The YAML data section fills three records: the dataset with its mel recipe (data.mel), the
  // text front-end, and the loader's threads (num_workers, prefetch_batches; its batch_size and
  // seed come from the train section: loader_options()).
  data::DataOptions data;
  text::TextOptions text;
  data::LoaderOptions loader;
  // The YAML model section: FlowGenerator's keyword arguments (n_vocab, out_channels and
  // n_speakers are filled in by model_options()).
  models::GlowTTSOptions model;
  RunSection run;
  std::string source;  // the file it was read from, for messages
  // Where each explicitly set key came from ("file.yaml:12" or "--set"), for messages.
  std::map<std::string, std::string> origin;
};

}  // namespace monoflow::train
