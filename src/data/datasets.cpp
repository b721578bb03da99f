#include "data/datasets.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "common/error.h"
#include "data/manifest.h"

namespace monoflow::data {

std::vector<Utterance> read_manifest(const std::string& filelist, const DataOptions& o, BadLines& bad) {
  if (filelist.empty()) return read_ljspeech(o.dataset_dir, bad);
  return read_filelist(filelist, o.n_speakers > 1, o.n_speakers, o.dataset_dir, bad, o.allow_outside_paths);
}

void drop_repeated_audio(std::vector<Utterance>& train, std::vector<Utterance>& validation, BadLines& bad) {
  std::map<std::string, Utterance> first;  // by lexically normal audio path
  for (std::vector<Utterance>* list : {&train, &validation}) {
    std::vector<Utterance> kept;
    for (Utterance& u : *list) {
      const std::string audio = std::filesystem::path(u.audio_path).lexically_normal().string();
      const auto [at, fresh] = first.emplace(audio, u);
      if (!fresh) {
        const Utterance& f = at->second;
        bad.report(u.source, u.line,
                   "utterance '" + u.id + "' repeats " + f.source + ":" + std::to_string(f.line) + " ('" + f.id +
                       "'): both name " + u.audio_path + "; list each audio file once");
        continue;
      }
      kept.push_back(std::move(u));
    }
    *list = std::move(kept);
  }
}

Datasets load_datasets(const DataOptions& options, const TextEncoder& encoder) {
  options.validate();
  BadLines bad(options.on_bad_line);
  std::vector<Utterance> train = read_manifest(options.training_files, options, bad);
  std::vector<Utterance> val;
  if (!options.validation_files.empty()) {
    val = read_manifest(options.validation_files, options, bad);
    drop_repeated_audio(train, val, bad);
  } else {
    drop_repeated_audio(train, val, bad);
    const auto n = static_cast<int64_t>(train.size());
    if (n > 0 && options.validation_size >= n) {
      const std::string list = options.training_files.empty()
                                   ? (std::filesystem::path(options.dataset_dir) / "metadata.csv").string()
                                   : options.training_files;
      throw OptionError("data.validation_size",
                        std::to_string(options.validation_size) + " held-out utterances leave none of the " +
                            std::to_string(n) + " usable lines of " + list +
                            " for training; set it below " + std::to_string(n) +
                            " (e.g. --set data.validation_size=" + std::to_string(std::max<int64_t>(n / 10, 1)) +
                            "), or give data.validation_files");
    }
    auto split = seeded_split(train, options.validation_size, options.split_seed);
    train = std::move(split.first);
    val = std::move(split.second);
  }
  Datasets out;
  out.train = std::make_shared<const TtsDataset>(train, options, encoder, bad);
  out.validation = std::make_shared<const TtsDataset>(val, options, encoder, bad);
  out.bad_lines = bad.skipped();
  const auto& ts = out.train->stats();
  const auto& vs = out.validation->stats();
  char line[256];
  std::snprintf(line, sizeof line,
                "data: %lld training utterances (%.2f h), %lld validation; %lld bad line(s) "
                "skipped, %lld longer than max_mel_frames left out",
                static_cast<long long>(ts.kept), ts.audio_seconds / 3600.0,
                static_cast<long long>(vs.kept), static_cast<long long>(out.bad_lines),
                static_cast<long long>(ts.too_long + vs.too_long));
  std::cerr << line << "\n";
  return out;
}

}  // namespace monoflow::data
