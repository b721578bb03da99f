// Hand-made damage to zip archives (our checkpoints, torch.save files) for the tests and the
// fuzzers: records rewritten and the archive rebuilt with valid CRCs, so that only what the
// records state is wrong, not the bytes (which the CRC check would catch first).
#pragma once

#include <caffe2/serialize/inline_container.h>

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace monoflow::train::testing {

// `archive` with `edit` applied to each record's bytes (records named without the archive's
// folder: "data.pkl", "data/0"). "" when `archive` is no readable zip.
inline std::string rezip(const std::string& archive,
                         const std::function<void(const std::string& name, std::string& bytes)>& edit) {
  try {
    std::istringstream in(archive);
    caffe2::serialize::PyTorchStreamReader reader(&in);
    std::string out;
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
      out.append(static_cast<const char*>(data), n);
      return n;
    });
    for (const std::string& name : reader.getAllRecords()) {
      if (name == ".data/serialization_id") continue;  // the writer adds its own
      auto rec = reader.getRecord(name);
      std::string bytes(static_cast<const char*>(std::get<0>(rec).get()), std::get<1>(rec));
      edit(name, bytes);
      writer.writeRecord(name, bytes.data(), bytes.size());
    }
    writer.writeEndOfFile();
    return out;
  } catch (const std::exception&) {
    return "";
  }
}

// `archive` with the one occurrence of `from` in its data.pkl replaced by `to`; throws when
// `from` is not there exactly once (the test's assumption about the pickle broke).
inline std::string replace_in_pickle(const std::string& archive, const std::string& from, const std::string& to) {
  int found = 0;
  std::string out = rezip(archive, [&](const std::string& name, std::string& bytes) {
    if (name != "data.pkl") return;
    const size_t at = bytes.find(from);
    if (at == std::string::npos || bytes.find(from, at + 1) != std::string::npos) return;
    bytes.replace(at, from.size(), to);
    ++found;
  });
  if (found != 1 || out.empty()) throw std::runtime_error("replace_in_pickle: the pattern is not in data.pkl once");
  return out;
}

// BININT (J, 4 bytes little-endian) of `v`, as the pickles write offsets, sizes and counts.
inline std::string binint(int32_t v) {
  std::string s = "J";
  for (int i = 0; i < 4; ++i) s += static_cast<char>((static_cast<uint32_t>(v) >> (8 * i)) & 0xff);
  return s;
}

}  // namespace monoflow::train::testing
