// serve: a checkpoint behind HTTP. Coqui tts-server's /api/tts (a wav), /api/mel and
// /api/durations (JSON), a page at / to listen to the voice and see its alignment, /health.
// Concurrent requests are batched by one worker behind a bounded queue. Everything it does
// lives in src/serve/ (docs/serve.md).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>

#include "cli_main.h"
#include "synthesis_flags.h"
#include "common/host_memory.h"
#include "infer/synthesis.h"
#include "serve/server.h"
#include "serve/stop_signal.h"
#include "train/threads.h"

int main(int argc, char** argv) {
  CLI::App app{"Serve a monoflow checkpoint over HTTP: Coqui tts-server's API, JSON of the mel and durations, a page at /."};
  monoflow::train::SynthesisOptions o;
  monoflow::serve::ServeOptions s;
  monoflow::add_synthesis_flags(app, o);
  app.add_option("--host", s.host, "address to listen on (0.0.0.0: every interface)");
  app.add_option("--port", s.port, "port to listen on; 0 for a free one (printed)")->check(CLI::Range(0, 65535));
  app.add_option("--speaker", o.speaker,
                 "the speaker of a request without speaker_id (multi-speaker models; without it such a request is 400)")
      ->default_str("none")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--queue", s.queue, "requests that may wait for the worker; one more is answered 503")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-batch", s.max_batch, "requests the worker synthesizes at once, as one batch")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-wait-ms", s.batch_wait_ms,
                 "after the first request, wait up to this long for more to fill the batch")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-chars", s.max_chars, "a longer text is answered 413")->check(CLI::PositiveNumber);
  app.add_option("--max-frames", o.max_frames,
                 "a text predicted to need more mel frames is answered 413 (30000: ~6 min at 22050 Hz)");
  app.add_option("--seed", o.seed, "seed of the prior noise: a text sounds the same in every request");
  return monoflow::cli_main(app, argc, argv, monoflow::CliStyle("serve"), [&] {
    monoflow::train::set_intra_op_threads(/*requested: automatic*/ 0, /*loader workers*/ 0);
    monoflow::keep_freed_host_memory();  // no page faults on every request's activations (host_memory.h)
    std::unique_ptr<monoflow::serve::Server> server;  // outlives `stop`, whose thread may call it
    std::atomic<monoflow::serve::Server*> running{nullptr};
    // Before any thread starts: the signals are blocked in all of them (stop_signal.h).
    monoflow::serve::StopOnSignal stop([&] {
      if (auto* r = running.load()) r->stop();
    });
    server = std::make_unique<monoflow::serve::Server>(o, s);
    const int port = server->bind();
    running = server.get();
    if (stop.signal() != 0) return 0;  // stopped while the model loaded
    const auto& model = server->synthesizer();
    std::printf("serve: http://%s:%d/ (checkpoint step %lld, %d speaker(s), %d Hz; queue %d, batches of up to %d)\n",
                s.host.c_str(), port, static_cast<long long>(model.step()), std::max(model.n_speakers(), 1),
                model.sample_rate(), s.queue, s.max_batch);
    std::fflush(stdout);
    server->run();
    if (stop.signal() != 0) std::fprintf(stderr, "serve: stopped by signal %d\n", stop.signal());
    return 0;
  });
}
