// Entry point for the trainer: data options -> validated training and validation datasets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/options.h"

namespace monoflow::data {

struct Datasets {
  std::shared_ptr<const TtsDataset> train;
  std::shared_ptr<const TtsDataset> validation;
  int64_t bad_lines = 0;  // skipped under on_bad_line: skip
};

// The utterances of `filelist` (read_filelist, with dataset_dir as the base of its paths and
// allow_outside_paths), or of dataset_dir's metadata.csv when `filelist` is empty.
std::vector<Utterance> read_manifest(const std::string& filelist, const DataOptions& options, BadLines& bad);

// A second line naming an audio file that an earlier line of `train` or `validation` names
// (the same wav trained twice, or with two transcripts, or both trained and validated) is a bad
// line naming both places: "utterance 'a' repeats metadata.csv:3 ('a'): both name ...".
void drop_repeated_audio(std::vector<Utterance>& train, std::vector<Utterance>& validation, BadLines& bad);

// Training utterances from training_files (a filelist) or else dataset_dir (LJSpeech layout);
// validation from validation_files, or else a seeded split (validation_size, split_seed) of
// the training utterances. Prints a one-line summary to stderr. Throws UserError / FileError
// for bad options, missing manifests, or (on_bad_line: error) the first bad line; an
// OptionError (data.validation_size, with the counts) when the split would leave no training
// utterance.
Datasets load_datasets(const DataOptions& options, const TextEncoder& encoder);

}  // namespace monoflow::data
