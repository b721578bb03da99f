// Paths built from data stay in their folder (docs/reliability.md, "Data stays in its
// folders"). An utterance id names files (the audio wavs/<id>.wav, align's
// durations/<id>.json, synthesize's <out>/<id>.wav), so it must be a plain name; a filelist's
// path may have sub-folders but must not lead out of the dataset folder. The checks are
// lexical (no file-system access): a symbolic link inside a folder is followed as its owner
// set it up. Header-only.
#pragma once

#include <filesystem>
#include <string>

#include "common/error.h"

namespace monoflow {

// "" when `name` can be used as a file name inside a folder, else why not: empty, "." or "..",
// or holding '/', '\\', NUL or another control character.
inline std::string name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name == "." || name == "..") return "is '" + name + "', a folder reference";
  for (const char c : name) {
    if (c == '/' || c == '\\') return "holds a path separator ('" + std::string(1, c) + "')";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "holds a control character (NUL, tab, ...)";
  }
  return "";
}

// True when `path` lies strictly inside `dir` once both are lexically normalised ("a/../b" is
// "b"). A relative `path` is taken relative to the working directory, as `dir` when relative;
// an absolute path is inside an absolute dir only. "" counts as ".".
inline bool lexically_inside(const std::string& dir, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path d = fs::path(dir.empty() ? "." : dir).lexically_normal();
  const fs::path p = fs::path(path.empty() ? "." : path).lexically_normal();
  if (d.is_absolute() != p.is_absolute()) return false;
  const fs::path rel = p.lexically_relative(d);
  if (rel.empty() || rel == ".") return false;
  return *rel.begin() != "..";
}

// dir/<name><ext>: a file named after data (an utterance id) inside `dir`. Throws UserError
// naming `what` (e.g. "utterance id") when the name is not a plain name or the path would
// leave `dir`.
inline std::string child_path(const std::string& dir, const std::string& name, const std::string& ext,
                              const std::string& what) {
  if (const std::string why = name_problem(name); !why.empty()) {
    throw UserError(what + " '" + name + "' " + why + ": it names a file in " + dir + ", so it must be a plain name");
  }
  const std::string path = (std::filesystem::path(dir) / (name + ext)).string();
  if (!lexically_inside(dir, path)) throw UserError(what + " '" + name + "' would write outside " + dir);
  return path;
}

}  // namespace monoflow
