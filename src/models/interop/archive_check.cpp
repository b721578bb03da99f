#include "models/interop/archive_check.h"

#include <c10/core/CPUAllocator.h>

#include <map>
#include <vector>

#include "common/error.h"
#include "common/tensor_bounds.h"
#include "models/interop/pickle_reader.h"

namespace monoflow::models {
namespace {

void check_pickle(caffe2::serialize::PyTorchStreamReader& reader, const std::string& pickle,
                  const std::string& prefix, const std::string& source) {
  auto record = reader.getRecord(pickle);
  const std::string program(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
  std::map<std::string, uint64_t> held;  // storage key -> bytes its record holds
  // Storages without data: only their declared size matters here, nothing reads them.
  const StorageLoader declared = [&](const StorageRef& ref) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(ref.numel), static_cast<uint64_t>(c10::elementSize(ref.dtype)),
                               &bytes) || bytes > (uint64_t{1} << 62)) {
      throw FileError(source, 0, "corrupt file: storage '" + ref.key + "' declares " + std::to_string(ref.numel) +
                                     " elements");
    }
    const std::string name = prefix + ref.key;
    held[ref.key] = reader.hasRecord(name) ? reader.getRecordSize(name) : 0;
    return c10::Storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(bytes),
                        at::DataPtr(nullptr, c10::Device(c10::kCPU)), nullptr, /*resizable=*/false);
  };
  std::vector<PickledTensor> tensors;
  try {
    tensors = pickled_tensors(program, declared, pickle);
  } catch (const FileError&) {
    throw;
  } catch (const UserError& e) {  // "data.pkl: cannot read ..."
    throw FileError(source, 0, std::string("corrupt file: ") + e.what());
  }
  for (const PickledTensor& t : tensors) {
    const auto bytes = static_cast<uint64_t>(t.tensor.storage().nbytes());
    const uint64_t have = held.at(t.storage.key);
    if (bytes > have) {
      throw FileError(source, 0, "corrupt file: tensor '" + t.path + "': its storage is declared as " +
                                     std::to_string(bytes) + " bytes, but its record '" + prefix + t.storage.key +
                                     "' holds " + (reader.hasRecord(prefix + t.storage.key) ? std::to_string(have)
                                                                                             : std::string("nothing (missing)")));
    }
    const std::string problem = tensor_storage_problem(t.tensor);
    if (!problem.empty()) throw FileError(source, 0, "corrupt file: tensor '" + t.path + "': " + problem);
  }
}

}  // namespace

void check_libtorch_archive(caffe2::serialize::PyTorchStreamReader& reader, const std::string& source) {
  if (!reader.hasRecord("data.pkl")) throw FileError(source, 0, "corrupt file: the archive has no data.pkl");
  check_pickle(reader, "data.pkl", "data/", source);
  if (reader.hasRecord("constants.pkl")) check_pickle(reader, "constants.pkl", "constants/", source);
}

}  // namespace monoflow::models
