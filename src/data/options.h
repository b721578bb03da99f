// Options of the data library: the records the run configuration holds as its data section
// (train::Config::data, ::loader), so each field is declared once, here, with its default (the
// official Glow-TTS data config plus monoflow's additions). Plain structs, no LibTorch: the
// config includes this header. validate() lives in options.cpp (library monoflow_data_options).
#pragma once

#include <cstdint>
#include <string>

namespace monoflow::data {

// What the mel recipe depends on; every field here is part of the feature-cache key.
struct MelOptions {
  int sampling_rate = 22050;
  int filter_length = 1024;  // n_fft
  int hop_length = 256;
  int win_length = 1024;
  int n_mel_channels = 80;
  double mel_fmin = 0.0;
  double mel_fmax = 8000.0;
  double max_wav_value = 32768.0;
  bool add_noise = true;  // uniform dither on the int16 scale: (audio + U[0,1)) / max_wav_value

  int n_freqs() const { return filter_length / 2 + 1; }
  // Canonical text of every field, used as the cache key's settings part.
  std::string settings_key() const;
  // Throws OptionError naming the data.* key of a value out of range.
  void validate() const;
};

// The dataset part of the data section.
struct DataOptions {
  bool load_mel_from_disk = false;  // accepted for config compatibility; the cache plays this role
  std::string training_files;       // filelist (path|text or path|speaker|text); empty: dataset_dir
  std::string validation_files;     // filelist; empty: seeded split of the training data
  MelOptions mel;
  int n_speakers = 0;  // > 1: filelists are path|speaker|text
  // ours
  std::string dataset_dir;                    // LJSpeech layout: metadata.csv + wavs/
  int validation_size = 100;                  // utterances held out by the seeded split
  std::string on_bad_line = "skip";           // skip (warn and count) | error
  std::string on_rate_mismatch = "resample";  // resample (soxr) | error
  // Empty: no feature cache (mels computed each time); the trainer passes <run dir>/cache then.
  std::string cache_dir;
  int max_mel_frames = 1000;                  // longer utterances are left out (0: no limit)
  // Filelist audio paths may be absolute or lead out of dataset_dir (or the working directory)
  // with "..": off by default, so that a list cannot make a tool read files outside the dataset.
  bool allow_outside_paths = false;
  // Not in the config file (the trainer passes them): the seed of the validation split
  // (train.seed), and the model's model.n_sqz: the decoder sees mel frames cut to a multiple of
  // it, and alignment needs at least one of those frames per text token.
  int64_t split_seed = 1234;
  int n_sqz = 1;

  // Throws OptionError naming the data.* key when a value is out of range or an enum is unknown.
  void validate() const;
};

// The loader part (num_workers, prefetch_batches from the data section; batch_size, seed from
// the train section; rank / world_size from the distributed setup).
struct LoaderOptions {
  int batch_size = 32;
  int64_t seed = 1234;
  bool shuffle = true;          // false: fixed length-sorted order (validation)
  bool drop_last = false;       // drop a final partial batch
  int bucket_batches = 32;      // length sorting happens within windows of this many batches
  int rank = 0;
  int world_size = 1;
  int num_workers = 2;          // background threads building batches (0: build on next())
  int prefetch_batches = 4;     // batches built ahead of the consumer
  bool pin_memory = true;       // page-locked host tensors when CUDA is available

  // Throws OptionError naming the key (data.num_workers, ...) of a value out of range.
  void validate() const;
};

}  // namespace monoflow::data
