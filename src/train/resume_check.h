// What --resume compares between the checkpoint and the run that continues it, so that a
// change is named rather than noticed later in the curves (docs/reliability.md, "Resuming on
// a changed config or dataset"):
//   config_changes    the keys whose values differ between two config snapshots (to_yaml text)
//   dataset_identity  what a checkpoint records of its data: the training set's size and a
//                     hash of its ids, and the validation set's ids
//   dataset_changes   what differs between two identities, in words; the validation set apart,
//                     as a changed one breaks the validation curve
#pragma once

#include <string>
#include <vector>

namespace monoflow::data {
class TtsDataset;
}

namespace monoflow::train {

// "train.learning_rate (1.0 -> 0.5)", one per changed key, in the snapshots' order; a key
// only one side has is "(not set)" on the other. Unreadable YAML gives one entry "config".
std::vector<std::string> config_changes(const std::string& before_yaml, const std::string& after_yaml);

// `validation` may be null (no validation set).
std::string dataset_identity(const data::TtsDataset& train, const data::TtsDataset* validation);

struct DatasetChanges {
  std::string training;    // "" when the training set has the same ids
  std::string validation;  // "" when the validation set has the same ids
};
// `before` "" (a checkpoint written before identities were recorded) compares as unchanged.
DatasetChanges dataset_changes(const std::string& before, const std::string& after);

}  // namespace monoflow::train
