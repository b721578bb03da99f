// Fills the feature cache of a set of datasets on several threads (what `preprocess` does):
// each worker takes the next utterance, computes its mel unless it is cached already (or
// always, with `force`) and stores it. Workers run torch ops without intra-op threads
// (SerialTorchOps). The first error stops the others and is rethrown on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "data/dataset.h"

namespace monoflow::data {

struct CacheFillProgress {
  size_t done = 0;              // utterances handled so far
  size_t total = 0;             // utterances to handle
  int64_t audio_samples = 0;    // samples of the utterances handled so far
  double elapsed_s = 0;         // since the fill started
};

struct CacheFillOptions {
  int jobs = 1;                 // worker threads (>= 1)
  bool force = false;           // recompute entries that are already cached
  // Called on the calling thread about every 200 ms while the workers run.
  std::function<void(const CacheFillProgress&)> on_progress;
};

struct CacheFillResult {
  size_t utterances = 0;        // handled (all of them)
  size_t computed = 0;          // of which computed now; the rest were cached already
  double audio_seconds = 0;     // of all the datasets, from their stats
  double elapsed_s = 0;
};

// Every utterance of `datasets` (null entries are skipped), in order. Throws what a worker threw
// first (UserError / FileError for unreadable audio or cache problems).
CacheFillResult fill_feature_cache(const std::vector<const TtsDataset*>& datasets, const CacheFillOptions& options);

}  // namespace monoflow::data
