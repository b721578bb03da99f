// serve: a model behind HTTP. Coqui tts-server's API (/api/tts -> audio/wav, GET or POST),
// JSON of the mel and the durations, a page at / to listen to the voice, and /health. Requests
// are batched by one worker (TtsService) behind a bounded queue: a full queue answers 503.
// docs/serve.md lists the endpoints, their parameters and statuses.
#pragma once

#include <memory>
#include <string>

#include "infer/synthesis.h"
#include "serve/tts_service.h"

namespace monoflow::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 5002;        // 0: a free port the OS picks (bind() returns it)
  int queue = 64;         // requests waiting for the worker; one more is answered 503
  int max_batch = 8;      // requests the worker says at once
  int batch_wait_ms = 0;  // after the first request, how long the worker waits for more to batch
  int max_chars = 1000;   // a longer text is answered 413
};

class Server {
 public:
  // Loads the model (UserError / FileError as Synthesizer) and starts the worker.
  Server(train::SynthesisOptions synthesis, ServeOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Opens the listening socket; returns its port. UserError naming --host and --port if it cannot.
  int bind();
  // Answers requests until stop() (from another thread, or a signal: stop_signal.h).
  void run();
  void stop();
  ServiceStats stats() const;
  const train::Synthesizer& synthesizer() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace monoflow::serve
