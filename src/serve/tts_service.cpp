#include "serve/tts_service.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include "common/error.h"

namespace monoflow::serve {
namespace {

// The reply to a request whose synthesis threw.
TtsReply failure(const std::exception_ptr& error) {
  TtsReply reply;
  try {
    std::rethrow_exception(error);
  } catch (const train::FrameBudgetError& e) {
    reply.status = 413;
    reply.error = e.what();
  } catch (const UserError& e) {
    reply.status = 400;
    reply.error = e.what();
  } catch (const c10::Error& e) {
    reply.status = 500;
    reply.error = std::string("internal error: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    reply.status = 500;
    reply.error = std::string("internal error: ") + e.what();
  }
  return reply;
}

}  // namespace

TtsService::TtsService(train::Synthesizer& synthesizer, size_t queue, size_t max_batch,
                       std::chrono::milliseconds gather)
    : synthesizer_(synthesizer), max_batch_(std::max<size_t>(max_batch, 1)), gather_(gather), queue_(queue) {
  worker_ = std::thread([this] { work(); });
}

TtsService::~TtsService() {
  for (Job& job : queue_.close()) job.reply.set_value(TtsReply{503, "the server is stopping", {}});
  worker_.join();
}

std::optional<std::future<TtsReply>> TtsService::submit(TtsRequest request) {
  Job job{std::move(request), {}};
  std::future<TtsReply> reply = job.reply.get_future();
  if (!queue_.try_push(job)) {
    ++refused_;
    return std::nullopt;
  }
  return reply;
}

ServiceStats TtsService::stats() const {
  ServiceStats s;
  s.queued = static_cast<int64_t>(queue_.size());
  s.served = served_;
  s.failed = failed_;
  s.refused = refused_;
  s.batches = batches_;
  s.largest_batch = largest_batch_;
  return s;
}

void TtsService::work() {
  for (;;) {
    std::vector<Job> batch = queue_.pop_batch(max_batch_, gather_);
    if (batch.empty()) return;  // closed
    say(batch);
  }
}

// One batch; when it fails (a text with nothing to say, one over the frame budget), each
// request is said alone, so that only the one at fault gets the error.
void TtsService::say(std::vector<Job>& batch) {
  std::vector<train::Utterance> texts;
  for (const Job& job : batch) {
    texts.push_back({job.request.text, "text", job.request.speaker, /*noise_position=*/0});
  }
  std::vector<std::optional<TtsReply>> replies(batch.size());
  const auto done = [&](size_t k, train::SynthesisResult&& r) {
    replies[k] = TtsReply{200, "", std::move(r)};
  };
  ++batches_;
  try {
    synthesizer_.say_all(texts, static_cast<int>(texts.size()), done);
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    for (size_t k = 0; k < batch.size(); ++k) {
      if (replies[k]) continue;
      if (batch.size() == 1) {
        replies[k] = failure(error);
        continue;
      }
      try {
        synthesizer_.say_all({texts[k]}, 1, [&](size_t, train::SynthesisResult&& r) { done(k, std::move(r)); });
      } catch (...) {
        replies[k] = failure(std::current_exception());
      }
    }
  }
  int64_t largest = largest_batch_;
  while (largest < static_cast<int64_t>(batch.size()) &&
         !largest_batch_.compare_exchange_weak(largest, static_cast<int64_t>(batch.size()))) {
  }
  for (size_t k = 0; k < batch.size(); ++k) {
    ++(replies[k]->status == 200 ? served_ : failed_);
    batch[k].reply.set_value(std::move(*replies[k]));
  }
}

}  // namespace monoflow::serve
