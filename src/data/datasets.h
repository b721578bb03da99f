// Entry point for the trainer: data options -> validated training and validation datasets.
#pragma once

#include <cstdint>
#include <memory>

#include "data/dataset.h"
#include "data/options.h"

namespace monoflow::data {

struct Datasets {
  std::shared_ptr<const TtsDataset> train;
  std::shared_ptr<const TtsDataset> validation;
  int64_t bad_lines = 0;  // skipped under on_bad_line: skip
};

// Training utterances from training_files (a filelist) or else dataset_dir (LJSpeech layout);
// validation from validation_files, or else a seeded split (validation_size, split_seed) of
// the training utterances. Prints a one-line summary to stderr. Throws UserError / FileError
// for bad options, missing manifests, or (on_bad_line: error) the first bad line.
Datasets load_datasets(const DataOptions& options, const TextEncoder& encoder);

}  // namespace monoflow::data
