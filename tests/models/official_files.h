// Files written by the official Glow-TTS's own saving code (scripts/models/official_checkpoint.py
// runs utils.save_checkpoint with commons.Adam's numpy learning rate), for the tests that read
// them (tests/models, tests/train). Needs MONOFLOW_TEST_PYTHON and MONOFLOW_SCRIPTS_DIR.
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace monoflow::official_files {

using Tensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The configured Python, when it can import torch and numpy (else "": the tests skip).
inline std::string python_with_torch() {
  const std::string python = MONOFLOW_TEST_PYTHON;
  if (python.empty() || std::system((python + " -c 'import torch, numpy' >/dev/null 2>&1").c_str()) != 0) return "";
  return python;
}

// Runs a shell command; its stdout and stderr, its exit status in *status.
inline std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  *status = ::pclose(pipe);
  return out;
}

// "key AxBxC" per tensor, the format official_checkpoint.py reads.
inline void write_keys(const Tensors& tensors, const std::string& path) {
  std::ofstream out(path);
  for (const auto& [key, t] : tensors) {
    out << key << " ";
    for (int64_t d = 0; d < t.dim(); ++d) out << (d ? "x" : "") << t.size(d);
    out << "\n";
  }
}

// Writes G_1.pth, G_1_legacy.pth, ddi_G.pth (+ .values, G_1.meta) into `dir` for a model with
// these keys and shapes; "" on success, else the script's output.
inline std::string make_official_checkpoints(const std::string& python, const Tensors& model, const std::string& dir) {
  write_keys(model, dir + "/keys.txt");
  int status = 0;
  const std::string out = run(python + " " + MONOFLOW_SCRIPTS_DIR + "/models/official_checkpoint.py " + dir +
                                  "/keys.txt " + dir,
                              &status);
  return status == 0 ? "" : out + " (exit status " + std::to_string(status) + ")";
}

// A <file>.values dump: key, shape, float32 bytes in hex, a line each, in the file's order.
inline Tensors read_values(const std::string& path) {
  Tensors out;
  std::ifstream in(path);
  std::string key, shape, hex;
  while (in >> key >> shape >> hex) {
    std::vector<int64_t> sizes;
    std::istringstream dims(shape);
    for (std::string d; std::getline(dims, d, 'x');) sizes.push_back(std::stoll(d));
    auto t = torch::empty(sizes, torch::kFloat32);
    auto* bytes = static_cast<unsigned char*>(t.data_ptr());
    for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes[i / 2] = static_cast<unsigned char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    out.emplace_back(key, t);
  }
  return out;
}

// "name value" lines of G_1.meta: the value (hex floats read exactly by strtod).
inline double meta_value(const std::string& meta_path, const std::string& name, int index = 0) {
  std::ifstream in(meta_path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream s(line);
    std::string n;
    s >> n;
    if (n != name) continue;
    std::string v;
    for (int i = 0; i <= index; ++i) s >> v;
    return std::strtod(v.c_str(), nullptr);
  }
  return -1;
}

}  // namespace monoflow::official_files
