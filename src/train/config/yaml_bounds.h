// Bounds on a config's YAML, checked before it is read into nodes: yaml-cpp builds a node of
// several hundred bytes per item, so an 80 MB file holding a 20-million-item list took 35 s and
// 9.8 GB before the schema could say that train.betas takes two numbers. A config is a few
// KB of keys; these bounds are far above any config the schema accepts, and far below what
// costs memory.
//   check_config_file_size   the file itself (before it is read)
//   check_yaml_bounds        a streaming pass over the YAML events (no nodes): list length,
//                            mapping size, nesting depth, text length, total items
// Each error is a UserError naming the place (file:line, or `--set key`) and the key.
#pragma once

#include <cstdint>
#include <string>

namespace monoflow::train {

struct YamlBounds {
  static constexpr int64_t kMaxFileBytes = 1 << 20;   // 1 MiB; configs/ljspeech.yaml is ~2 KB
  static constexpr int64_t kMaxListItems = 64;        // the longest list a key takes: text_cleaners
  static constexpr int64_t kMaxMapEntries = 256;      // the schema has under 100 keys in all
  static constexpr int64_t kMaxDepth = 8;             // the schema nests 3 deep (section, key, list)
  static constexpr int64_t kMaxTextBytes = 16 << 10;  // a path (PATH_MAX is 4096) fits many times
  static constexpr int64_t kMaxItems = 10000;         // scalars, lists and mappings in one text
};

// Throws a FileError naming `path` when it is a regular file larger than kMaxFileBytes, or a
// directory; a missing file is left for the reader to report.
void check_config_file_size(const std::string& path);

// Walks `yaml` as events and throws at the first bound passed: a FileError naming
// source:line when `override_key` is empty, else a UserError "--set <override_key>: ...".
// Syntax errors are left to YAML::Load, which reports them as before.
void check_yaml_bounds(const std::string& yaml, const std::string& source, const std::string& override_key = "");

}  // namespace monoflow::train
