#include "data/loader.h"

#include "common/error.h"
#include "data/serial_ops.h"

namespace monoflow::data {


DataLoader::DataLoader(std::shared_ptr<const TtsDataset> dataset, const LoaderOptions& options)
    : dataset_(std::move(dataset)),
      options_(options),
      sampler_(dataset_->mel_lengths(), options) {
  // The sampler has checked the options (LoaderOptions::validate).
  for (int i = 0; i < options.num_workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Batch build_batch(const TtsDataset& dataset, const std::vector<int64_t>& indices, const LoaderOptions& options,
                  int64_t epoch) {
  SerialTorchOps serial;  // one batch per thread
  const uint64_t epoch_seed = mix_seed(static_cast<uint64_t>(options.seed), static_cast<uint64_t>(epoch));
  std::vector<Sample> samples;
  samples.reserve(indices.size());
  for (int64_t i : indices) {
    samples.push_back(dataset.get(static_cast<size_t>(i), mix_seed(epoch_seed, static_cast<uint64_t>(i))));
  }
  Batch batch = collate(std::move(samples));
  if (options.pin_memory) batch = pin(std::move(batch));
  return batch;
}

Batch DataLoader::build(const std::vector<int64_t>& indices, int64_t epoch) const {
  return build_batch(*dataset_, indices, options_, epoch);
}

void DataLoader::install_locked() {
  ++generation_;
  plan_ = sampler_.epoch(epoch_);
  claim_ = next_;
  ready_.clear();
  failed_.clear();
  installed_ = true;
  cv_.notify_all();
}

void DataLoader::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] {
      return stop_ || (installed_ && claim_ < static_cast<int64_t>(plan_.size()) &&
                       claim_ < next_ + options_.prefetch_batches);
    });
    if (stop_) return;
    const int64_t index = claim_++;
    const uint64_t generation = generation_;
    const int64_t epoch = epoch_;
    const std::vector<int64_t> indices = plan_[index];
    lock.unlock();
    std::optional<Batch> batch;
    std::exception_ptr error;
    try {
      batch = build(indices, epoch);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) continue;  // the position moved meanwhile
    if (error) {
      failed_[index] = error;
    } else {
      ready_.emplace(index, std::move(*batch));
    }
    cv_.notify_all();
  }
}

std::optional<Batch> DataLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!installed_) install_locked();
  if (next_ >= static_cast<int64_t>(plan_.size())) {
    ++epoch_;
    next_ = 0;
    install_locked();  // workers start on the next epoch right away
    return std::nullopt;
  }
  const int64_t index = next_;
  if (workers_.empty()) {
    ++next_;
    const auto indices = plan_[index];
    const int64_t epoch = epoch_;
    lock.unlock();
    return build(indices, epoch);
  }
  cv_.wait(lock, [&] { return ready_.count(index) || failed_.count(index); });
  if (auto f = failed_.find(index); f != failed_.end()) {
    std::exception_ptr error = f->second;
    failed_.erase(f);
    claim_ = index;  // a retry after the caller handles it rebuilds this batch
    ++generation_;
    ready_.clear();
    cv_.notify_all();
    std::rethrow_exception(error);
  }
  Batch batch = std::move(ready_.at(index));
  ready_.erase(index);
  ++next_;
  cv_.notify_all();
  return batch;
}

LoaderPosition DataLoader::position() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {epoch_, next_};
}

void DataLoader::set_position(LoaderPosition position) {
  if (position.epoch < 0 || position.batch < 0 || position.batch > batches_per_epoch()) {
    throw UserError("loader position (epoch " + std::to_string(position.epoch) + ", batch " +
                    std::to_string(position.batch) + ") is out of range: an epoch has " +
                    std::to_string(batches_per_epoch()) +
                    " batches (did the dataset or batch size change since the checkpoint?)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  epoch_ = position.epoch;
  next_ = position.batch;
  install_locked();
}

}  // namespace monoflow::data
