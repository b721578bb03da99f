// The bounded queue and the worker behind serve: a full queue refuses at once, the worker takes
// what is queued as one batch, and closing hands back what was left.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "serve/batch_queue.h"
#include "serve/tts_service.h"
#include "serve_test_util.h"
#include "test_util.h"
#include "tiny_checkpoint.h"

namespace monoflow::serve {
namespace {

using std::chrono::milliseconds;

TEST(BatchQueue, RefusesWhenFullAndPopsUpToABatch) {
  BatchQueue<int> q(3);
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(q.try_push(i)) << i;
  int extra = 4;
  EXPECT_FALSE(q.try_push(extra));
  EXPECT_EQ(extra, 4);  // not taken
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.pop_batch(2, milliseconds(0)), (std::vector<int>{1, 2}));
  EXPECT_TRUE(q.try_push(extra));
  EXPECT_EQ(q.pop_batch(8, milliseconds(0)), (std::vector<int>{3, 4}));
  // Closed: what is left comes back, and pushes are refused.
  int five = 5;
  EXPECT_TRUE(q.try_push(five));
  EXPECT_EQ(q.close(), (std::deque<int>{5}));
  int six = 6;
  EXPECT_FALSE(q.try_push(six));
  EXPECT_TRUE(q.pop_batch(8, milliseconds(100)).empty());
}

TEST(BatchQueue, TheWorkerWaitsForItsFirstItemThenGathersMore) {
  BatchQueue<int> q(8);
  auto batch = std::async(std::launch::async, [&] { return q.pop_batch(3, milliseconds(2000)); });
  EXPECT_EQ(batch.wait_for(milliseconds(50)), std::future_status::timeout);  // nothing queued yet
  for (int i = 1; i <= 4; ++i) q.try_push(i);
  // Full at 3: it does not wait out the 2 s.
  ASSERT_EQ(batch.wait_for(milliseconds(1500)), std::future_status::ready);
  EXPECT_EQ(batch.get(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(q.pop_batch(3, milliseconds(0)), (std::vector<int>{4}));
}

class TtsServiceQueue : public train::testing::SharedCheckpointSuite<TtsServiceQueue> {
 public:
  static std::string make_checkpoint(const train::testing::TempDir& dir) { return train::tiny_checkpoint(dir); }
};

// Twenty requests submitted at once to a queue of 2 with batches of 1: beyond the 3 the service
// can hold, the rest are refused at once, and every one taken is answered 200.
TEST_F(TtsServiceQueue, AFullQueueRefusesAndEveryTakenRequestIsAnswered) {
  auto o = testing::synthesis_options(*checkpoint_);
  o.griffin_lim_iterations = 32;  // a synthesis far slower than twenty submits
  o.speaker = train::kSpeakerLater;
  train::Synthesizer synthesizer(o);
  std::vector<std::future<TtsReply>> taken;
  int refused = 0;
  {
    TtsService service(synthesizer, /*queue=*/2, /*max_batch=*/1, milliseconds(0));
    for (int i = 0; i < 20; ++i) {
      auto reply = service.submit({"a sentence long enough to keep the worker busy for a while.", -1});
      if (reply) {
        taken.push_back(std::move(*reply));
      } else {
        ++refused;
      }
    }
    // At any moment the service holds at most 3 (2 queued, 1 in the worker's batch): the
    // requests taken are at most 3 more than those finished by the end of the loop.
    const ServiceStats after_loop = service.stats();
    EXPECT_EQ(after_loop.refused, refused);
    EXPECT_LE(static_cast<int64_t>(taken.size()), 3 + after_loop.served + after_loop.failed);
    EXPECT_GE(taken.size(), 2u);
    EXPECT_GE(refused, 10);  // a synthesis takes far longer than twenty submits
    for (auto& reply : taken) {
      const TtsReply r = reply.get();
      EXPECT_EQ(r.status, 200) << r.error;
      EXPECT_GT(r.result.audio.numel(), 0);
    }
    EXPECT_EQ(service.stats().served, static_cast<int64_t>(taken.size()));
  }
  EXPECT_EQ(refused, 20 - static_cast<int>(taken.size()));
}

// Stopping answers what is still queued with 503 instead of saying it.
TEST_F(TtsServiceQueue, StoppingAnswersTheQueuedRequestsWith503) {
  auto o = testing::synthesis_options(*checkpoint_);
  o.griffin_lim_iterations = 32;
  o.speaker = train::kSpeakerLater;
  train::Synthesizer synthesizer(o);
  std::vector<std::future<TtsReply>> taken;
  {
    TtsService service(synthesizer, 4, 1, milliseconds(0));
    for (int i = 0; i < 5; ++i) {
      if (auto reply = service.submit({"a sentence long enough to keep the worker busy for a while.", -1})) {
        taken.push_back(std::move(*reply));
      }
    }
  }  // destroyed with requests queued
  int ok = 0, stopping = 0;
  for (auto& reply : taken) {
    const TtsReply r = reply.get();
    ok += r.status == 200;
    stopping += r.status == 503 && r.error == "the server is stopping";
  }
  EXPECT_EQ(ok + stopping, static_cast<int>(taken.size()));
  EXPECT_GE(stopping, 1);
}

}  // namespace
}  // namespace monoflow::serve
