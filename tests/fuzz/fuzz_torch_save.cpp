// Fuzzes the torch.save reader (models/interop: the zip and legacy containers, the pickle
// machine, the tensor and storage checks) as convert_weights and train --init-from use it:
// read the state dict and copy it into a model of the file's shape (the copy once read out of
// bounds, issue #13). Also runs the bytes as a bare pickle program.
#include <filesystem>

#include "archive_mutation.h"
#include "fuzz_driver.h"
#include "models/glow_tts.h"
#include "models/interop/pickle_compat.h"
#include "models/interop/pickle_reader.h"
#include "models/interop/weights.h"
#include "zip_edit.h"

using namespace monoflow;

namespace {

std::string dir() {
  static const std::string d = fuzz::temp_dir("fuzz_torch_save");
  return d;
}

const std::string kSeedFile = std::string(MONOFLOW_SOURCE_DIR) + "/tests/models/data/tiny_official_checkpoint.pt";

// The model the seed file describes: what a fuzzed file is loaded into.
models::GlowTTS& model() {
  static models::GlowTTS m = [] {
    const models::StateDict w = models::read_state_dict(kSeedFile);
    return models::GlowTTS(models::infer_options(w, models::GlowTTSOptions(1, 1), kSeedFile));
  }();
  return m;
}

void run(const std::string& input) {
  const std::string path = dir() + "/G_1.pth";
  fuzz::write_bytes(path, input);
  try {
    // The pickle machine alone on the raw bytes: storages as empty placeholders.
    models::unpickle(input, 0, nullptr, [](const models::StorageRef&) { return c10::Storage(
        c10::Storage::use_byte_size_t(), 0, at::DataPtr(nullptr, c10::Device(c10::kCPU)), nullptr, false); }, "raw");
  } catch (const UserError&) {
  }
  int64_t iteration = 0;
  const models::StateDict w = models::read_state_dict(path, &iteration);
  models::load_state_dict(*model(), w, path, /*strict=*/false);
}

std::string with_state_dict(const c10::impl::GenericDict& d) {
  const std::vector<char> bytes = models::write_torch_save(d);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

int main(int argc, char** argv) {
  fuzz::Target t;
  t.name = "fuzz_torch_save";
  const std::string official = fuzz::read_bytes(kSeedFile);
  t.seeds = {official, fuzz::read_bytes(std::string(MONOFLOW_SOURCE_DIR) + "/tests/models/data/tiny_official_checkpoint_legacy.pt")};
  t.valid_seeds = t.seeds.size();
  // Issue #13's files: a storage offset past the end, a storage declared larger than its
  // record (written by write_torch_save, the pickle edited behind valid CRCs).
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("w", torch::arange(10, torch::kFloat32));
  const std::string small = with_state_dict(d);
  t.seeds.push_back(small);
  t.seeds.push_back(train::testing::replace_in_pickle(small, "tQ" + train::testing::binint(0), "tQ" + train::testing::binint(1000000)));
  t.seeds.push_back(train::testing::replace_in_pickle(small, train::testing::binint(10) + "tQ", train::testing::binint(1000) + "tQ"));
  fuzz::mutate_as_pickle_archive(t);
  t.run = run;
  t.fixed_cases = fuzz::unreadable_path_cases([](const std::string& path) { models::read_state_dict(path); }, dir,
                                              "missing.pth", "weights file");
  return fuzz::fuzz_main(argc, argv, t);
}
