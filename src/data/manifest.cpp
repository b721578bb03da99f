#include "data/manifest.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>

#include "common/contained_path.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/strings.h"
#include "data/text/utf8.h"

namespace fs = std::filesystem;

namespace monoflow::data {

BadLines::BadLines(const std::string& policy) {
  if (policy != "skip" && policy != "error") {
    throw UserError("data.on_bad_line: '" + policy + "' is not one of skip | error");
  }
  skip_ = policy == "skip";
}

void BadLines::report(const std::string& file, int line, const std::string& what) {
  if (!skip_) throw FileError(file, line, what);
  if (skipped_ < max_printed_) {
    std::cerr << "warning: " << FileError(file, line, what).what() << " (skipped)\n";
  }
  ++skipped_;
}

namespace {

std::vector<std::string> split_pipes(const std::string& s, size_t max_fields) {
  std::vector<std::string> out;
  size_t start = 0;
  while (out.size() + 1 < max_fields) {
    const size_t p = s.find('|', start);
    if (p == std::string::npos) break;
    out.push_back(s.substr(start, p - start));
    start = p + 1;
  }
  out.push_back(s.substr(start));
  return out;
}

// The whole list. A directory would read as a list without a line, and a FIFO would block the
// open forever: both are refused naming the file (common/input_file.h).
std::istringstream open_text(const std::string& path, const std::string& hint) {
  std::string text;
  if (!read_input_file(path, hint, text)) throw FileError(path, 0, "cannot open: " + hint);
  return std::istringstream(std::move(text));
}

// Editors on Windows start UTF-8 files with a byte-order mark; it is not part of the first id.
void strip_utf8_bom(std::string& first_line) {
  if (first_line.rfind("\xEF\xBB\xBF", 0) == 0) first_line.erase(0, 3);
}

// "" when `line` is valid UTF-8, else what is wrong (the text front-end would silently turn
// the bytes into unknown characters).
std::string utf8_problem(const std::string& line) {
  const size_t at = text::first_invalid_utf8(line);
  if (at == std::string::npos) return "";
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(line[at]));
  return "invalid UTF-8 (byte " + std::string(hex) + " at column " + std::to_string(at + 1) +
         "); save the file as UTF-8";
}

// Calls record(fields, line) for every non-blank line of `in`, split at '|' into `fields`
// fields (the last keeps any further '|'); a line with fewer, or with bytes that are not
// UTF-8, goes to `bad`, which names `expected`. CRLF files read like LF ones; a UTF-8 BOM
// is skipped.
template <typename Record>
void for_each_record(std::istream& in, const std::string& file, size_t fields,
                     const std::string& expected, BadLines& bad, Record record) {
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (n == 1) strip_utf8_bom(line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    if (const std::string problem = utf8_problem(line); !problem.empty()) {
      bad.report(file, n, problem);
      continue;
    }
    const std::vector<std::string> f = split_pipes(line, fields);
    if (f.size() < fields) {
      bad.report(file, n, "expected " + std::to_string(fields) + " '|'-separated fields (" + expected +
                              "), found " + std::to_string(f.size()));
      continue;
    }
    record(f, n);
  }
}

}  // namespace

std::vector<Utterance> read_ljspeech(const std::string& dataset_dir, BadLines& bad) {
  const std::string meta = (fs::path(dataset_dir) / "metadata.csv").string();
  std::istringstream in = open_text(meta, "an LJSpeech folder needs metadata.csv (id|raw|normalized)");
  std::vector<Utterance> out;
  for_each_record(in, meta, 3, "id|raw|normalized", bad, [&](const std::vector<std::string>& f, int n) {
    Utterance u;
    u.id = trim(f[0]);
    u.text = trim(f[2]);
    if (u.id.empty()) return bad.report(meta, n, "empty id");
    // The id names wavs/<id>.wav and the files tools write for it: a name, never a path.
    if (const std::string why = name_problem(u.id); !why.empty()) {
      return bad.report(meta, n, "utterance id '" + u.id + "' " + why + "; an id is a file name in wavs/, not a path");
    }
    if (u.text.empty()) return bad.report(meta, n, "empty normalized text");
    u.audio_path = (fs::path(dataset_dir) / "wavs" / (u.id + ".wav")).string();
    u.source = meta;
    u.line = n;
    out.push_back(std::move(u));
  });
  return out;
}

std::vector<Utterance> read_filelist(const std::string& path, bool multi_speaker,
                                     int n_speakers, const std::string& base_dir,
                                     BadLines& bad, bool allow_outside) {
  std::istringstream in = open_text(path, multi_speaker ? "expected a filelist path|speaker|text"
                                                   : "expected a filelist path|text");
  std::vector<Utterance> out;
  for_each_record(in, path, multi_speaker ? 3 : 2, multi_speaker ? "path|speaker|text" : "path|text", bad,
                  [&](const std::vector<std::string>& f, int n) {
    Utterance u;
    const std::string audio = trim(f[0]);
    u.text = trim(f.back());
    if (audio.empty()) return bad.report(path, n, "empty audio path");
    if (u.text.empty()) return bad.report(path, n, "empty text");
    if (multi_speaker) {
      const std::string sp = trim(f[1]);
      char* end = nullptr;
      const long long v = sp.empty() ? -1 : std::strtoll(sp.c_str(), &end, 10);
      if (sp.empty() || *end != '\0' || v < 0) {
        return bad.report(path, n, "speaker '" + sp + "' is not a non-negative integer");
      }
      if (n_speakers > 0 && v >= n_speakers) {
        return bad.report(path, n, "speaker " + sp + " >= data.n_speakers (" + std::to_string(n_speakers) + ")");
      }
      u.speaker = v;
    }
    fs::path p(audio);
    if (!allow_outside) {
      const std::string folder = base_dir.empty() ? "the working directory" : base_dir;
      if (p.is_absolute()) {
        return bad.report(path, n, "audio path '" + audio + "' is absolute; give it relative to " + folder +
                                       " (or set data.allow_outside_paths: true)");
      }
      if (!lexically_inside(base_dir, (fs::path(base_dir) / p).string())) {
        return bad.report(path, n, "audio path '" + audio + "' leads out of " + folder +
                                       " (or set data.allow_outside_paths: true)");
      }
    }
    if (p.is_relative() && !base_dir.empty()) p = fs::path(base_dir) / p;
    u.audio_path = p.string();
    u.id = p.stem().string();
    if (const std::string why = name_problem(u.id); !why.empty()) {
      return bad.report(path, n, "utterance id '" + u.id + "' (the audio file's name) " + why);
    }
    u.source = path;
    u.line = n;
    out.push_back(std::move(u));
  });
  return out;
}

std::pair<std::vector<Utterance>, std::vector<Utterance>> seeded_split(
    const std::vector<Utterance>& all, int validation_size, int64_t seed) {
  const size_t n = all.size();
  size_t n_val = std::min<size_t>(std::max(validation_size, 0), n > 0 ? n - 1 : 0);
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(seed) ^ 0x5eed5111ULL);
  // Fisher-Yates with our own index draws: std::shuffle's algorithm is implementation-defined.
  for (size_t i = n; i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(idx[i - 1], idx[j]);
  }
  std::vector<char> is_val(n, 0);
  for (size_t i = 0; i < n_val; ++i) is_val[idx[i]] = 1;
  std::pair<std::vector<Utterance>, std::vector<Utterance>> out;
  for (size_t i = 0; i < n; ++i) (is_val[i] ? out.second : out.first).push_back(all[i]);
  return out;
}

}  // namespace monoflow::data
