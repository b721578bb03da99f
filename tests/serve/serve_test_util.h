// What the serve tests share: a Server on a loopback port the OS picks, run on a thread of
// its own; the few JSON fields the tests read; a wav's rate and samples; this process's RSS.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "infer/synthesis.h"
#include "serve/server.h"

namespace monoflow::serve::testing {

// The options every serve test synthesizes with: the CPU, and few Griffin-Lim iterations.
inline train::SynthesisOptions synthesis_options(const std::string& checkpoint) {
  train::SynthesisOptions o;
  o.checkpoint = checkpoint;
  o.device = "cpu";
  o.griffin_lim_iterations = 2;
  return o;
}

class RunningServer {
 public:
  RunningServer(const train::SynthesisOptions& synthesis, ServeOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<Server>(synthesis, options);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
    // Ready once it answers: stop() before listening would not stop it.
    for (int i = 0; i < 500 && !client().Get("/health"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~RunningServer() {
    server_->stop();
    thread_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  Server& server() { return *server_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::thread thread_;
};

// The raw JSON value of `key` in `json` (a number, a string, or a bracketed array).
inline std::string json_field(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  size_t begin = at + key.size() + 4, end = begin;
  if (json[begin] == '[') {
    int depth = 0;
    bool quoted = false;
    for (; end < json.size(); ++end) {
      const char c = json[end];
      if (quoted) {
        if (c == '\\') ++end;
        else if (c == '"') quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '[') {
        ++depth;
      } else if (c == ']' && --depth == 0) {
        return json.substr(begin, end + 1 - begin);
      }
    }
    return "";
  }
  if (json[begin] == '"') return json.substr(begin + 1, json.find('"', begin + 1) - begin - 1);
  while (end < json.size() && json[end] != ',' && json[end] != '}') ++end;
  return json.substr(begin, end - begin);
}

// Every number in a (nested) JSON array, in order.
inline std::vector<double> json_numbers(const std::string& array) {
  std::vector<double> v;
  const char* p = array.c_str();
  while (*p) {
    if (*p == '-' || (*p >= '0' && *p <= '9')) {
      char* end = nullptr;
      v.push_back(std::strtod(p, &end));
      p = end;
    } else {
      ++p;
    }
  }
  return v;
}

// The strings of a JSON array of strings (the escapes serve writes: \" \\ \n \u00XX).
inline std::vector<std::string> json_strings(const std::string& array) {
  std::vector<std::string> v;
  for (size_t i = 0; i < array.size(); ++i) {
    if (array[i] != '"') continue;
    std::string s;
    for (++i; i < array.size() && array[i] != '"'; ++i) {
      if (array[i] != '\\') {
        s += array[i];
      } else if (array[++i] == 'n') {
        s += '\n';
      } else if (array[i] == 'u') {
        s += static_cast<char>(std::strtol(array.substr(i + 1, 4).c_str(), nullptr, 16));
        i += 4;
      } else {
        s += array[i];
      }
    }
    v.push_back(s);
  }
  return v;
}

struct WavFacts {
  int rate = 0;
  int64_t samples = -1;
};

// A 16-bit mono wav's sample rate and sample count, from its fmt and data chunks.
inline WavFacts wav_facts(const std::string& wav) {
  WavFacts f;
  if (wav.size() < 12 || wav.compare(0, 4, "RIFF") != 0 || wav.compare(8, 4, "WAVE") != 0) return f;
  const auto u32 = [&](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, wav.data() + at, 4);
    return v;
  };
  for (size_t at = 12; at + 8 <= wav.size(); at += 8 + u32(at + 4) + (u32(at + 4) % 2)) {
    if (wav.compare(at, 4, "fmt ") == 0) f.rate = static_cast<int>(u32(at + 12));
    if (wav.compare(at, 4, "data") == 0) {
      f.samples = u32(at + 4) / 2;
      break;
    }
  }
  return f;
}

// VmRSS of this process in KiB (/proc/self/status).
inline int64_t rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

}  // namespace monoflow::serve::testing
