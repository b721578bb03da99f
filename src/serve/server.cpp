#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "serve/json.h"
#include "serve/page.h"
#include "serve/request.h"
#include "train/wav.h"

namespace monoflow::serve {
namespace {

// The methods each path answers; any other method gets 405, any other path 404.
const std::map<std::string, std::set<std::string>>& routes() {
  static const std::map<std::string, std::set<std::string>> r = {
      {"/", {"GET"}},
      {"/health", {"GET"}},
      {"/api/info", {"GET"}},
      {"/api/tts", {"GET", "POST"}},
      {"/api/mel", {"GET", "POST"}},
      {"/api/durations", {"GET", "POST"}},
      {"/locales", {"GET"}},
      {"/voices", {"GET"}},
      {"/process", {"GET", "POST"}},
  };
  return r;
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content("{\"error\": " + json_string(message) + ", \"status\": " + std::to_string(status) + "}\n",
                  "application/json");
}

// A parameter as Coqui's tts-server reads it: an HTTP header first (`text`, `speaker-id`), then
// the query or a form body (urlencoded or multipart).
std::string parameter(const httplib::Request& req, const char* name, const char* header) {
  if (const std::string v = req.get_header_value(header); !v.empty()) return v;
  if (req.has_param(name)) return req.get_param_value(name);
  if (req.has_file(name)) return req.get_file_value(name).content;
  return "";
}

std::string frames_per_second(const train::Synthesizer& s) {
  return json_number(static_cast<double>(s.sample_rate()) / s.hop_length());
}

// The frame timing that /api/mel and /api/durations end with: ", \"frame_rate\": ..., ...".
std::string frame_timing_fields(const train::Synthesizer& s) {
  return ", \"frame_rate\": " + frames_per_second(s) + ", \"sample_rate\": " + std::to_string(s.sample_rate()) +
         ", \"hop_length\": " + std::to_string(s.hop_length());
}

}  // namespace

struct Server::Impl {
  ServeOptions options;
  train::SynthesisOptions synthesis;
  train::Synthesizer synthesizer;
  TtsService service;
  httplib::Server http;

  Impl(train::SynthesisOptions s, ServeOptions o)
      : options(std::move(o)),
        synthesis(std::move(s)),
        synthesizer(synthesis),
        service(synthesizer, static_cast<size_t>(std::max(options.queue, 0)),
                static_cast<size_t>(std::max(options.max_batch, 1)), std::chrono::milliseconds(options.batch_wait_ms)) {
    // Enough threads that the queue, not the thread pool, is what fills first: each waiting
    // request holds a thread, and /health and the page must still be answered.
    const size_t threads = static_cast<size_t>(std::max(options.queue, 0) + std::max(options.max_batch, 1) + 8);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(1 << 20);
    // SO_REUSEADDR (a restart need not wait out TIME_WAIT) but not httplib's default
    // SO_REUSEPORT, with which a second serve on a taken port would start and share its traffic.
    http.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    add_routes();
  }

  // serve --speaker, or -1.
  int64_t default_speaker() const { return synthesis.speaker == train::kSpeakerLater ? -1 : synthesis.speaker; }

  // The request's synthesis, or nullopt once `res` holds its error (4xx, 503, 500). `mary`:
  // the parameters of the MaryTTS API (INPUT_TEXT, VOICE), which Coqui's server answers too.
  std::optional<TtsReply> synthesize(const httplib::Request& req, httplib::Response& res, bool mary = false) {
    RequestLimits limits;
    limits.max_chars = options.max_chars;
    limits.n_speakers = synthesizer.n_speakers();
    limits.default_speaker = default_speaker();
    const CheckedRequest checked =
        mary ? check_request(parameter(req, "INPUT_TEXT", "input-text"), parameter(req, "VOICE", "voice"), limits,
                             {"INPUT_TEXT", "VOICE"})
             : check_request(parameter(req, "text", "text"), parameter(req, "speaker_id", "speaker-id"), limits);
    if (checked.status != 200) {
      send_error(res, checked.status, checked.error);
      return std::nullopt;
    }
    std::optional<std::future<TtsReply>> future = service.submit({checked.text, checked.speaker});
    if (!future) {
      res.set_header("Retry-After", "1");
      send_error(res, 503,
                 "busy: " + std::to_string(options.queue) + " requests are waiting (--queue " +
                     std::to_string(options.queue) + "); retry later");
      return std::nullopt;
    }
    TtsReply reply = future->get();
    if (reply.status != 200) {
      send_error(res, reply.status, reply.error);
      return std::nullopt;
    }
    return reply;
  }

  void add_routes() {
    http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      const auto route = routes().find(req.path);
      if (route == routes().end()) return httplib::Server::HandlerResponse::Unhandled;  // 404 below
      const std::string method = req.method == "HEAD" ? "GET" : req.method;
      if (route->second.count(method) != 0) return httplib::Server::HandlerResponse::Unhandled;
      std::string allow;
      for (const std::string& m : route->second) allow += (allow.empty() ? "" : ", ") + m;
      res.set_header("Allow", allow);
      send_error(res, 405, req.method + " " + req.path + ": method not allowed; use " + allow);
      return httplib::Server::HandlerResponse::Handled;
    });
    // Errors that no handler wrote (an unknown path, a body over the limit): a message too.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404) {
        send_error(res, 404, req.path + ": no such path; serve answers /, /health, /api/info, /api/tts, /api/mel, "
                                        "/api/durations, and MaryTTS's /locales, /voices, /process (docs/serve.md)");
      } else if (res.status == 413) {
        send_error(res, 413, "request body over 1 MiB");
      } else {
        send_error(res, res.status, "bad request");
      }
    });

    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(index_page(), "text/html; charset=utf-8");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const ServiceStats s = service.stats();
      std::ostringstream j;
      j << "{\"status\": \"ok\", \"queued\": " << s.queued << ", \"served\": " << s.served
        << ", \"failed\": " << s.failed << ", \"refused\": " << s.refused << ", \"batches\": " << s.batches
        << ", \"largest_batch\": " << s.largest_batch << "}\n";
      res.set_content(j.str(), "application/json");
    });
    http.Get("/api/info", [this](const httplib::Request&, httplib::Response& res) {
      std::ostringstream j;
      j << "{\"speakers\": " << std::max(synthesizer.n_speakers(), 1) << ", \"default_speaker\": " << default_speaker()
        << ", \"sample_rate\": " << synthesizer.sample_rate() << ", \"hop_length\": " << synthesizer.hop_length()
        << ", \"frame_rate\": " << frames_per_second(synthesizer) << ", \"n_mels\": " << synthesizer.n_mels()
        << ", \"step\": " << synthesizer.step() << ", \"max_chars\": " << options.max_chars
        << ", \"max_frames\": " << synthesis.max_frames << ", \"max_batch\": " << options.max_batch
        << ", \"queue\": " << options.queue << "}\n";
      res.set_content(j.str(), "application/json");
    });

    // A WAV of the request's text: Coqui's parameters, or MaryTTS's (`mary`).
    const auto wav = [this](bool mary) {
      return [this, mary](const httplib::Request& req, httplib::Response& res) {
        if (auto reply = synthesize(req, res, mary)) {
          res.set_content(train::encode_wav16(reply->result.audio, reply->result.sample_rate), "audio/wav");
        }
      };
    };
    const auto tts = wav(/*mary=*/false);
    http.Get("/api/tts", tts);
    http.Post("/api/tts", tts);

    // The MaryTTS API as Coqui's server offers it (one English voice per speaker, gender
    // unknown), for clients such as Home Assistant's MaryTTS integration.
    http.Get("/locales", [](const httplib::Request&, httplib::Response& res) { res.set_content("en\n", "text/plain"); });
    http.Get("/voices", [this](const httplib::Request&, httplib::Response& res) {
      std::string voices;
      if (synthesizer.n_speakers() > 1) {
        for (int s = 0; s < synthesizer.n_speakers(); ++s) voices += std::to_string(s) + " en u\n";
      } else {
        voices = "default en u\n";
      }
      res.set_content(voices, "text/plain");
    });
    const auto process = wav(/*mary=*/true);
    http.Get("/process", process);
    http.Post("/process", process);

    // The mel as [n_mels][frames], as synthesize --mel-out writes it.
    const auto mel = [this](const httplib::Request& req, httplib::Response& res) {
      const auto reply = synthesize(req, res);
      if (!reply) return;
      const torch::Tensor m = reply->result.mel.contiguous();
      const float* v = m.data_ptr<float>();
      const int64_t n_mels = m.size(0), frames = m.size(1);
      std::string j = "{\"n_mels\": " + std::to_string(n_mels) + ", \"frames\": " + std::to_string(frames) +
                      frame_timing_fields(synthesizer) + ", \"mel\": [";
      j.reserve(j.size() + static_cast<size_t>(m.numel()) * 10);
      for (int64_t c = 0; c < n_mels; ++c) {
        j += c ? ",[" : "[";
        for (int64_t f = 0; f < frames; ++f) {
          if (f) j += ',';
          j += json_number(v[c * frames + f]);
        }
        j += ']';
      }
      res.set_content(j + "]}\n", "application/json");
    };
    http.Get("/api/mel", mel);
    http.Post("/api/mel", mel);

    // Each token said and the frames the model gave it (the alignment's rows summed).
    const auto durations = [this](const httplib::Request& req, httplib::Response& res) {
      const auto reply = synthesize(req, res);
      if (!reply) return;
      const train::SynthesisResult& r = reply->result;
      const torch::Tensor frames = r.alignment.sum(1).round().to(torch::kInt64).contiguous();
      std::string tokens, counts;
      for (size_t k = 0; k < r.tokens.size(); ++k) {
        tokens += (k ? ", " : "") + json_string(r.tokens[k]);
        counts += (k ? ", " : "") + std::to_string(frames[static_cast<int64_t>(k)].item<int64_t>());
      }
      res.set_content("{\"tokens\": [" + tokens + "], \"frames\": [" + counts +
                          "], \"total_frames\": " + std::to_string(r.mel.size(1)) +
                          frame_timing_fields(synthesizer) + "}\n",
                      "application/json");
    };
    http.Get("/api/durations", durations);
    http.Post("/api/durations", durations);
  }
};

Server::Server(train::SynthesisOptions synthesis, ServeOptions options) {
  if (options.queue < 1) throw UserError("--queue " + std::to_string(options.queue) + ": must be at least 1");
  if (options.max_batch < 1) throw UserError("--max-batch " + std::to_string(options.max_batch) + ": must be at least 1");
  if (options.batch_wait_ms < 0) {
    throw UserError("--batch-wait-ms " + std::to_string(options.batch_wait_ms) + ": must be 0 or more");
  }
  if (options.max_chars < 1) throw UserError("--max-chars " + std::to_string(options.max_chars) + ": must be at least 1");
  // Each request names its speaker; --speaker, when given, is the one of a request that does not.
  if (synthesis.speaker < 0) synthesis.speaker = train::kSpeakerLater;
  impl_ = std::make_unique<Impl>(std::move(synthesis), std::move(options));
}

Server::~Server() { stop(); }

int Server::bind() {
  const ServeOptions& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host)
                               : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0) {
    throw UserError("--host " + o.host + " --port " + std::to_string(o.port) +
                    ": cannot listen there (the port is taken, or the host is not an address of this machine); "
                    "pick another --port, or --port 0 for any free one");
  }
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() {
  if (impl_) impl_->http.stop();
}

ServiceStats Server::stats() const { return impl_->service.stats(); }

const train::Synthesizer& Server::synthesizer() const { return impl_->synthesizer; }

}  // namespace monoflow::serve
