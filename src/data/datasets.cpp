#include "data/datasets.h"

#include <cstdio>
#include <iostream>

#include "data/manifest.h"

namespace monoflow::data {

namespace {
std::vector<Utterance> read_manifest(const std::string& filelist, const DataOptions& o,
                                     BadLines& bad) {
  if (filelist.empty()) return read_ljspeech(o.dataset_dir, bad);
  return read_filelist(filelist, o.n_speakers > 1, o.n_speakers, o.dataset_dir, bad);
}
}  // namespace

Datasets load_datasets(const DataOptions& options, const TextEncoder& encoder) {
  options.validate();
  BadLines bad(options.on_bad_line);
  std::vector<Utterance> train = read_manifest(options.training_files, options, bad);
  std::vector<Utterance> val;
  if (!options.validation_files.empty()) {
    val = read_manifest(options.validation_files, options, bad);
  } else {
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
