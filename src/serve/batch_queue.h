// A bounded queue that one worker empties a batch at a time: producers never wait (a full
// queue refuses at once, so a server can answer 503 instead of piling up requests), the
// worker waits for the first item and then, for up to `gather`, for more to fill its batch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

namespace monoflow::serve {

template <class T>
class BatchQueue {
 public:
  explicit BatchQueue(size_t capacity) : capacity_(capacity) {}

  // false when the queue holds `capacity` items or is closed; the item is then not taken.
  bool try_push(T& item) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_ || items_.size() >= capacity_) return false;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
    return true;
  }

  // Up to `max` items, oldest first: waits for one, then up to `gather` for the batch to fill.
  // Empty once the queue is closed.
  std::vector<T> pop_batch(size_t max, std::chrono::milliseconds gather) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (gather.count() > 0 && !closed_) {
      ready_.wait_for(lock, gather, [&] { return closed_ || items_.size() >= max; });
    }
    std::vector<T> batch;
    while (!items_.empty() && batch.size() < max) {
      batch.push_back(std::move(items_.front()));
      items_.pop_front();
    }
    return batch;
  }

  // Refuses every later push, wakes the worker (whose pop_batch returns empty from now on)
  // and hands back what was still queued.
  std::deque<T> close() {
    std::deque<T> left;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      left.swap(items_);
    }
    ready_.notify_all();
    return left;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace monoflow::serve
