// A bounded load test on loopback: 16 clients send requests for 3 seconds to a server with a
// small queue. Every request is answered 200 or refused 503 (none lost, no other status, no
// crash), both happen, the server answers afterwards, and its memory stays bounded.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/server.h"
#include "serve_test_util.h"
#include "test_util.h"
#include "tiny_checkpoint.h"

namespace monoflow::serve {
namespace {

using namespace testing;

class ServeLoad : public train::testing::SharedCheckpointSuite<ServeLoad> {
 public:
  static std::string make_checkpoint(const train::testing::TempDir& dir) { return train::tiny_checkpoint(dir); }
};

TEST_F(ServeLoad, SixteenClientsForThreeSecondsGet200Or503AndMemoryStaysBounded) {
  constexpr int kClients = 16;
  constexpr auto kDuration = std::chrono::seconds(3);
  ServeOptions options;
  options.queue = 4;
  options.max_batch = 4;
  // 32 Griffin-Lim iterations (the default): the worker is slow enough that the first wave of
  // 16 requests overfills the queue of 4 on any machine.
  train::SynthesisOptions synthesis = synthesis_options(*checkpoint_);
  synthesis.griffin_lim_iterations = 32;
  RunningServer s(synthesis, options);
  const std::vector<std::string> texts = {"hello world.", "a somewhat longer sentence, said under load.", "yes.",
                                          "the quick brown fox jumps over the lazy dog."};
  // Warm-up: the allocator's first blocks and the first batch shapes are not growth.
  for (const std::string& text : texts) {
    ASSERT_EQ(s.client().Get("/api/tts", httplib::Params{{"text", text}}, httplib::Headers{})->status, 200);
  }
  const int64_t rss_before = rss_kib();

  std::mutex mutex;
  std::map<int, int> statuses;  // status -> count; -1: no reply (a connection error)
  std::map<std::string, int> errors;
  const auto end = std::chrono::steady_clock::now() + kDuration;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = s.client();
      for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
        const std::string& text = texts[static_cast<size_t>(c + i) % texts.size()];
        const char* path = (c + i) % 3 == 0 ? "/api/mel" : "/api/tts";
        const auto r = client.Get(path, httplib::Params{{"text", text}}, httplib::Headers{});
        std::lock_guard<std::mutex> lock(mutex);
        ++statuses[r ? r->status : -1];
        if (!r) ++errors[httplib::to_string(r.error())];
        if (r && r->status == 503 && json_field(r->body, "error").find("busy: 4 requests are waiting (--queue 4)") ==
                                         std::string::npos) {
          ++errors["503 without its message: " + r->body];
        }
        if (r && r->status == 200 && std::string(path) == "/api/tts" && wav_facts(r->body).samples <= 0) {
          ++errors["a 200 without a wav"];
        }
        // A refused client retries soon, not at once: a tight loop of 503s would only starve the
        // worker of the two cores.
        if (r && r->status == 503) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  for (auto& t : clients) t.join();
  const int64_t rss_after = rss_kib();

  int total = 0;
  for (const auto& [status, count] : statuses) total += count;
  std::string seen;
  for (const auto& [status, count] : statuses) seen += " " + std::to_string(status) + "x" + std::to_string(count);
  for (const auto& [error, count] : errors) ADD_FAILURE() << error << " (" << count << " times)";
  EXPECT_EQ(statuses[200] + statuses[503], total) << "statuses:" << seen;
  EXPECT_GT(statuses[200], 0) << seen;
  EXPECT_GT(statuses[503], 0) << seen;  // the queue of 4 filled: refused, not piled up
  const ServiceStats stats = s.server().stats();
  EXPECT_EQ(stats.served, statuses[200] + 4);  // + the warm-up
  EXPECT_EQ(stats.refused, statuses[503]);
  EXPECT_EQ(stats.failed, 0);
  EXPECT_EQ(stats.queued, 0);
  // Still answering.
  const auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  // Memory: growth under load stays under 128 MiB. Measured on 2 cores (2026-11-27): +19 MiB
  // after 1 s (29 served), +22-26 MiB after 3 s (66-103), +26 MiB after 12 s (294): the HTTP
  // threads' stacks and allocator arenas, not a cost per request. An unbounded queue or a
  // thread per request would pass the bound within the 3 s.
  std::printf("served %d, refused %d in %lld s; VmRSS %lld -> %lld KiB\n", statuses[200], statuses[503],
              static_cast<long long>(kDuration.count()), static_cast<long long>(rss_before),
              static_cast<long long>(rss_after));
  ASSERT_GT(rss_before, 0);
  EXPECT_LT(rss_after - rss_before, 128 * 1024) << "VmRSS grew from " << rss_before << " to " << rss_after << " KiB";
}

}  // namespace
}  // namespace monoflow::serve
