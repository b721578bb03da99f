// The training/validation loader: batches from a BucketBatchSampler, built by background
// threads ahead of the consumer, yielded in a deterministic order for (seed, epoch), with a
// position (epoch, batch) that can be saved and restored for exact resume.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/options.h"
#include "data/sampler.h"

namespace monoflow::data {

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // index of the next batch within the epoch (this rank's batches)
  bool operator==(const LoaderPosition& o) const { return epoch == o.epoch && batch == o.batch; }
};

// The batch of these dataset indices as a DataLoader of `options` builds it in `epoch` (each
// item's dither seed, pinned memory): align builds with it the batch of another frame grid's
// dataset holding the same utterances. Thread-safe.
Batch build_batch(const TtsDataset& dataset, const std::vector<int64_t>& indices, const LoaderOptions& options,
                  int64_t epoch);

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const TtsDataset> dataset, const LoaderOptions& options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch of the current epoch, or nullopt once the epoch is exhausted; the position
  // then moves to {epoch + 1, 0} and the following call starts that epoch. The batches, the
  // dither and therefore the tensors are a pure function of (seed, epoch, batch index), whatever
  // num_workers is. An error building a batch (e.g. audio deleted) is rethrown here.
  std::optional<Batch> next();

  // The position of the batch next() returns next. Save it with a checkpoint; set_position()
  // with it reproduces the same batches from there on.
  LoaderPosition position() const;
  void set_position(LoaderPosition position);

  int64_t batches_per_epoch() const { return sampler_.batches_per_epoch(); }
  const TtsDataset& dataset() const { return *dataset_; }

 private:
  Batch build(const std::vector<int64_t>& indices, int64_t epoch) const;
  void install_locked();  // plan for epoch_, prefetch restarts at next_
  void worker_loop();

  std::shared_ptr<const TtsDataset> dataset_;
  LoaderOptions options_;
  BucketBatchSampler sampler_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t epoch_ = 0;
  int64_t next_ = 0;   // consumer position within the epoch
  int64_t claim_ = 0;  // next batch a worker will build
  uint64_t generation_ = 0;
  bool installed_ = false;
  bool stop_ = false;
  std::vector<std::vector<int64_t>> plan_;
  std::map<int64_t, Batch> ready_;
  std::map<int64_t, std::exception_ptr> failed_;
  std::vector<std::thread> workers_;
};

}  // namespace monoflow::data
