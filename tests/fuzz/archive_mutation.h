// Structure-aware mutation of zip archives (torch.save files, our checkpoints): one record's
// bytes mutated (the pickle, more often than not), and the archive rebuilt with valid CRCs,
// so that the readers behind the CRC check see the damage.
#pragma once

#include <caffe2/serialize/inline_container.h>

#include <sstream>
#include <string>

#include "fuzz_driver.h"
#include "zip_edit.h"

namespace monoflow::fuzz {

using monoflow::train::testing::rezip;

// One record mutated: a pickle (*.pkl) three times in four, else any record.
inline std::string mutate_one_record(const std::string& archive, const std::vector<std::string>& dictionary,
                                     Rng& rng) {
  std::vector<std::string> names, pickles;
  try {
    std::istringstream in(archive);
    caffe2::serialize::PyTorchStreamReader reader(&in);
    names = reader.getAllRecords();
  } catch (const std::exception&) {
  }
  for (const auto& n : names) {
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".pkl") == 0) pickles.push_back(n);
  }
  if (names.empty()) return mutate(archive, {}, dictionary, rng, archive.size() * 2 + 64);
  const std::string target = !pickles.empty() && rng() % 4 != 0 ? pickles[rng() % pickles.size()]
                                                                : names[rng() % names.size()];
  std::string out = rezip(archive, [&](const std::string& name, std::string& bytes) {
    if (name == target) bytes = mutate(bytes, {}, dictionary, rng, bytes.size() * 2 + 64);
  });
  return out.empty() ? archive : out;
}

// A string literal with its NULs.
template <size_t N>
std::string bytes_of(const char (&s)[N]) {
  return std::string(s, N - 1);
}

// Pickle tokens: opcodes, the tensor rebuild and storage names, and the integers that offsets,
// sizes and strides are made of (BININT1, BININT2, BININT, LONG1).
inline std::vector<std::string> pickle_dictionary() {
  return {"(", ")", "t", "R", "Q", "b", "}", "]", "e", "u", "s", "h\x01", "q\x01", "N", "\x88", "\x89", ".",
          bytes_of("K\x00"), "K\x01", "K\xff", "M\xff\xff", "J\xff\xff\xff\x7f", bytes_of("J\x00\x00\x00\x80"),
          "J\xff\xff\xff\xff", "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f",
          "ctorch._utils\n_rebuild_tensor_v2\n", "ctorch\nFloatStorage\n", "ctorch\nLongStorage\n",
          "ctorch\nByteStorage\n", "ccollections\nOrderedDict\n", bytes_of("X\x07\x00\x00\x00storage"),
          bytes_of("X\x03\x00\x00\x00""cpu")};
}

// Sets a torch.save-archive target's mutations: pickle tokens for the byte mutator, and one
// record mutated with the archive rebuilt (valid CRCs) for the structure-aware step.
inline void mutate_as_pickle_archive(Target& t) {
  t.dictionary = pickle_dictionary();
  t.mutate_structure = [](const std::string& input, Rng& rng) {
    return mutate_one_record(input, pickle_dictionary(), rng);
  };
}

}  // namespace monoflow::fuzz
