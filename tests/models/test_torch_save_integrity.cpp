// Hostile torch.save files (convert_weights' input): damaged bytes, storage offsets and sizes
// that point outside the stored data, a directory instead of a file. Each must be a clear
// error naming the file (and the tensor), never a crash or garbage weights.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "models/interop/pickle_compat.h"
#include "models/interop/weights.h"

namespace monoflow::models {
namespace {

// A torch.save file {"w": 10 floats}, written by our own writer.
std::vector<char> saved_weights() {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("w", torch::arange(10, torch::kFloat32) + 1000.5);
  return write_torch_save(d);
}

// The archive's data.pkl with `edit` applied, re-zipped with valid CRCs (so that only the
// pickle's statements are wrong, not the bytes).
std::vector<char> with_edited_pickle(const std::vector<char>& file, const std::function<void(std::string&)>& edit) {
  std::istringstream in(std::string(file.begin(), file.end()));
  caffe2::serialize::PyTorchStreamReader reader(&in);
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.insert(out.end(), static_cast<const char*>(data), static_cast<const char*>(data) + n);
    return n;
  });
  for (const std::string& name : {std::string("data.pkl"), std::string("byteorder"), std::string("data/0")}) {
    auto rec = reader.getRecord(name);
    std::string bytes(static_cast<const char*>(std::get<0>(rec).get()), std::get<1>(rec));
    if (name == "data.pkl") edit(bytes);
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
  return out;
}

// BININT (J, 4 bytes little-endian) of `v`.
std::string binint(int32_t v) {
  std::string s = "J";
  for (int i = 0; i < 4; ++i) s += static_cast<char>((static_cast<uint32_t>(v) >> (8 * i)) & 0xff);
  return s;
}

// Our writer emits ... numel 't' 'Q' (BINPERSID) offset ...: replace that offset, or numel.
void set_storage_offset(std::string& pkl, int32_t offset) {
  const size_t at = pkl.find("tQ" + binint(0));
  ASSERT_NE(at, std::string::npos);
  pkl.replace(at + 2, 5, binint(offset));
}
void set_storage_numel(std::string& pkl, int32_t numel) {
  const size_t at = pkl.find(binint(10) + "tQ");
  ASSERT_NE(at, std::string::npos);
  pkl.replace(at, 5, binint(numel));
}

void expect_error(const std::vector<char>& file, const std::vector<std::string>& words) {
  try {
    read_torch_save(file, "weights.pt");
    FAIL() << "read a damaged file";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("weights.pt: ", 0), 0u) << what;
    for (const auto& w : words) EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' not in: " << what;
  }
}

TEST(TorchSaveIntegrity, TheUnchangedFileReadsBack) {
  auto v = read_torch_save(saved_weights(), "weights.pt");
  EXPECT_TRUE(torch::equal(v.toGenericDict().at("w").toTensor(), torch::arange(10, torch::kFloat32) + 1000.5));
  auto rezipped = read_torch_save(with_edited_pickle(saved_weights(), [](std::string&) {}), "weights.pt");
  EXPECT_TRUE(torch::equal(rezipped.toGenericDict().at("w").toTensor(), v.toGenericDict().at("w").toTensor()));
}

TEST(TorchSaveIntegrity, AFlippedByteFailsTheRecordsCrc) {
  auto file = saved_weights();
  const auto w = torch::arange(10, torch::kFloat32) + 1000.5;
  const std::string raw(static_cast<const char*>(w.data_ptr()), 40);
  const std::string all(file.begin(), file.end());
  const size_t at = all.find(raw);
  ASSERT_NE(at, std::string::npos);
  file[at + 17] ^= 0x01;
  expect_error(file, {"record '", "data/0", "CRC-32"});
}

TEST(TorchSaveIntegrity, StorageOffsetPastTheEndIsRefusedNamingTheTensor) {
  // Far past the end (was a SIGSEGV in copy_), and a little (was silently exported garbage).
  for (int32_t offset : {1000000, 5}) {
    SCOPED_TRACE(offset);
    expect_error(with_edited_pickle(saved_weights(), [&](std::string& p) { set_storage_offset(p, offset); }),
                 {"tensor 'w'", "storage offset " + std::to_string(offset), "holds 10"});
  }
}

TEST(TorchSaveIntegrity, StorageLargerThanItsRecordIsRefused) {
  expect_error(with_edited_pickle(saved_weights(), [](std::string& p) { set_storage_numel(p, 1000); }),
               {"tensor 'w'", "declared as 4000 bytes", "'data/0' holds 40"});
}

TEST(TorchSaveIntegrity, ADirectoryIsAClearError) {
  const auto dir = std::filesystem::temp_directory_path();
  try {
    read_state_dict(dir.string());
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace monoflow::models
