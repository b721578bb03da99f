#include "models/interop/pickle_compat.h"

#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "common/error.h"
#include "common/tensor_bounds.h"
#include "common/zip_integrity.h"
#include "models/interop/pickle_reader.h"

namespace monoflow::models {
namespace {

class VectorReadAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit VectorReadAdapter(const std::vector<char>& data) : data_(data) {}
  size_t size() const override { return data_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= data_.size()) return 0;
    n = std::min<size_t>(n, data_.size() - pos);
    std::memcpy(buf, data_.data() + pos, n);
    return n;
  }

 private:
  const std::vector<char>& data_;
};

}  // namespace

namespace {

class TorchSavePickler {
 public:
  void put(const c10::IValue& v) {
    if (v.isNone()) {
      op('N');
    } else if (v.isBool()) {
      op(v.toBool() ? '\x88' : '\x89');
    } else if (v.isInt()) {
      put_int(v.toInt());
    } else if (v.isDouble()) {
      op('G');
      const double d = v.toDouble();
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);  // big-endian
    } else if (v.isString()) {
      put_string(v.toStringRef());
    } else if (v.isTensor()) {
      put_tensor(v.toTensor());
    } else if (v.isGenericDict()) {
      op('}');
      auto d = v.toGenericDict();
      if (d.empty()) return;
      op('(');
      for (const auto& kv : d) {
        put(kv.key());
        put(kv.value());
      }
      op('u');
    } else if (v.isList()) {
      op(']');
      auto l = v.toListRef();
      if (l.empty()) return;
      op('(');
      for (const auto& e : l) put(e);
      op('e');
    } else if (v.isTuple()) {
      op('(');
      for (const auto& e : v.toTupleRef().elements()) put(e);
      op('t');
    } else {
      TORCH_CHECK(false, "write_torch_save: cannot serialise a ", v.tagKind());
    }
  }

  std::string finish() {
    op('.');
    return std::move(out_);
  }
  std::vector<std::pair<std::string, at::Tensor>>& storages() { return storages_; }

  TorchSavePickler() { out_ += "\x80\x02"; }  // PROTO 2, as torch.save

 private:
  void op(char c) { out_ += c; }
  void put_u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void put_int(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      put_u32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
      op('\x8a');  // LONG1, 8 bytes little-endian two's complement
      out_ += '\x08';
      const auto u = static_cast<uint64_t>(v);
      for (int i = 0; i < 8; ++i) out_ += static_cast<char>((u >> (8 * i)) & 0xff);
    }
  }
  void put_string(const std::string& s) {
    op('X');
    put_u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void put_global(const char* module, const char* name) {
    op('c');
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
  }
  static const char* storage_name(at::ScalarType t) {
    switch (t) {
      case at::kFloat: return "FloatStorage";
      case at::kDouble: return "DoubleStorage";
      case at::kHalf: return "HalfStorage";
      case at::kBFloat16: return "BFloat16Storage";
      case at::kLong: return "LongStorage";
      case at::kInt: return "IntStorage";
      case at::kShort: return "ShortStorage";
      case at::kChar: return "CharStorage";
      case at::kByte: return "ByteStorage";
      case at::kBool: return "BoolStorage";
      default: TORCH_CHECK(false, "write_torch_save: unsupported dtype ", t);
    }
  }
  void put_tensor(const at::Tensor& t_in) {
    auto t = t_in.detach().to(at::kCPU).contiguous();
    const std::string key = std::to_string(storages_.size());
    storages_.emplace_back(key, t);
    put_global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');  // persistent id: ('storage', <T>Storage, key, 'cpu', numel)
    put_string("storage");
    put_global("torch", storage_name(t.scalar_type()));
    put_string(key);
    put_string("cpu");
    put_int(t.numel());
    op('t');
    op('Q');          // BINPERSID
    put_int(0);       // storage offset
    op('(');
    for (auto s : t.sizes()) put_int(s);
    op('t');
    op('(');
    for (auto s : t.strides()) put_int(s);
    op('t');
    op('\x89');       // requires_grad False
    put_global("collections", "OrderedDict");  // backward hooks: OrderedDict()
    op(')');
    op('R');
    op('t');
    op('R');
  }

  std::string out_;
  std::vector<std::pair<std::string, at::Tensor>> storages_;
};

}  // namespace

std::vector<char> write_torch_save(const c10::IValue& value) {
  TorchSavePickler pickler;
  pickler.put(value);
  const std::string pkl = pickler.finish();
  std::vector<char> bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    bytes.insert(bytes.end(), p, p + n);
    return n;
  });
  writer.writeRecord("data.pkl", pkl.data(), pkl.size());
  static const std::string byteorder = "little";
  writer.writeRecord("byteorder", byteorder.data(), byteorder.size());
  for (const auto& [key, t] : pickler.storages()) {
    writer.writeRecord("data/" + key, t.data_ptr(), t.numel() * t.element_size());
  }
  writer.writeEndOfFile();
  return bytes;
}

namespace {

// The storage records handed to the pickle reader: data pointer -> (record name, bytes).
using RecordSizes = std::map<const void*, std::pair<std::string, size_t>>;

// numel elements of the storage's type, in bytes.
size_t declared_bytes(const StorageRef& ref, const std::string& source) {
  uint64_t n = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(ref.numel), static_cast<uint64_t>(c10::elementSize(ref.dtype)), &n) ||
      n > SIZE_MAX) {
    throw FileError(source, 0, "corrupt file: storage '" + ref.key + "' declares " + std::to_string(ref.numel) +
                                   " elements");
  }
  return static_cast<size_t>(n);
}

// A storage of the size the pickle declares over `data`, a record of `held` bytes: a record
// shorter than declared is caught by check_tensors, before anything reads it.
c10::Storage storage_over(const StorageRef& ref, at::DataPtr data, size_t held, const std::string& record,
                          RecordSizes* sizes, const std::string& source) {
  (*sizes)[data.get()] = {record, held};
  return c10::Storage(c10::Storage::use_byte_size_t(), declared_bytes(ref, source), std::move(data), nullptr,
                      /*resizable=*/false);
}

// torch.save's format before torch 1.6 (and with _use_new_zipfile_serialization=False): the
// pickles magic number, protocol version, sys_info and the object, then the pickled sorted
// list of storage keys, then per key an int64 element count and the raw little-endian data.
// The object's storages are named before their data is reached: they get it afterwards.
c10::IValue read_legacy_torch_save(const std::vector<char>& bytes, const std::string& source,
                                   RecordSizes* sizes) {
  const std::string all(bytes.begin(), bytes.end());
  // The first pickle is torch's magic number 0x1950a86a20f9469cfc6c (LONG1 of 10 bytes).
  static const std::string magic("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
  if (all.compare(0, magic.size(), magic) != 0) {
    throw UserError(source + ": not a torch.save file (a pickle, but without torch's legacy-format magic number)");
  }
  size_t pos = magic.size(), end = 0;
  for (int i = 0; i < 2; ++i) {  // protocol version, sys_info
    unpickle(all, pos, &end, nullptr, source);
    pos = end;
  }
  std::map<std::string, std::pair<StorageRef, c10::Storage>> named;
  c10::IValue main = unpickle(all, pos, &end, [&](const StorageRef& ref) {
    c10::Storage s(c10::Storage::use_byte_size_t(), 0, at::DataPtr(nullptr, c10::Device(c10::kCPU)), nullptr, false);
    named.emplace(ref.key, std::make_pair(ref, s));
    return s;
  }, source);
  pos = end;
  auto keys = unpickle(all, pos, &end, nullptr, source);
  pos = end;
  if (!keys.isList()) throw UserError(source + ": legacy torch.save file without a storage key list");
  for (const auto& k : keys.toListRef()) {
    if (!k.isString()) throw UserError(source + ": legacy torch.save file with a storage key that is not a string");
    const std::string key = k.toStringRef();
    auto it = named.find(key);
    if (it == named.end()) throw UserError(source + ": storage " + key + " has no type");
    if (pos + 8 > all.size()) throw UserError(source + ": truncated storage data");
    int64_t numel = 0;
    std::memcpy(&numel, all.data() + pos, 8);
    pos += 8;
    const auto item = static_cast<int64_t>(c10::elementSize(it->second.first.dtype));
    if (numel < 0 || numel > static_cast<int64_t>(all.size() - pos) / item) throw UserError(source + ": truncated storage data");
    const size_t nbytes = static_cast<size_t>(numel * item);
    auto data = c10::GetCPUAllocator()->allocate(nbytes);
    if (nbytes > 0) std::memcpy(data.get(), all.data() + pos, nbytes);  // an empty storage has no pointer
    pos += nbytes;
    c10::Storage& s = it->second.second;  // the storage the tensors already share
    s.set_nbytes(declared_bytes(it->second.first, source));
    s.set_data_ptr_noswap(std::move(data));
    (*sizes)[s.data()] = {key, nbytes};
  }
  for (const auto& [key, ref_and_storage] : named) {
    if (ref_and_storage.second.data() == nullptr && ref_and_storage.first.numel > 0) {
      throw FileError(source, 0, "corrupt file: storage '" + key + "' is named but its data is missing");
    }
  }
  return main;
}

// Checks every tensor in `value` (named by its path of dict keys and list indices) against
// the record that holds its storage: the storage the pickle declares fits in the record, and
// the tensor's offset, shape and strides stay inside the storage.
void check_tensors(const c10::IValue& value, const std::string& name, const RecordSizes& records,
                   const std::string& source) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    const auto declared = static_cast<uint64_t>(t.storage().nbytes());
    auto rec = records.find(t.storage().data());
    // A storage that is no record's was allocated here (a numpy array's): it holds what it declares.
    const uint64_t held = rec != records.end() ? rec->second.second : t.storage().resizable() ? declared : 0;
    if (declared > held) {
      throw FileError(source, 0, "corrupt file: tensor '" + name + "': its storage is declared as " +
                                     std::to_string(declared) + " bytes, but " +
                                     (rec == records.end() ? std::string("no storage record holds it")
                                                           : "its record '" + rec->second.first + "' holds " +
                                                                 std::to_string(held)));
    }
    check_tensor_in_storage(t, source, name);
  } else if (value.isGenericDict()) {
    for (const auto& kv : value.toGenericDict()) {
      const std::string key = kv.key().isString() ? kv.key().toStringRef() : "?";
      check_tensors(kv.value(), name.empty() ? key : name + "." + key, records, source);
    }
  } else if (value.isList() || value.isTuple()) {
    const auto elements = value.isList() ? value.toListRef().vec() : value.toTupleRef().elements().vec();
    for (size_t i = 0; i < elements.size(); ++i) {
      check_tensors(elements[i], name + "[" + std::to_string(i) + "]", records, source);
    }
  }
}

c10::IValue read_zip_torch_save(const std::vector<char>& bytes, const std::string& source, RecordSizes* sizes) {
  zip::verify_records(bytes.data(), bytes.size(), source);  // LibTorch's reader skips the CRCs
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<VectorReadAdapter>(bytes));
  auto record = reader.getRecord("data.pkl");
  const std::string pkl(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
  return unpickle(pkl, 0, nullptr, [&](const StorageRef& ref) {
    auto rec = reader.getRecord("data/" + ref.key);
    return storage_over(ref, std::move(std::get<0>(rec)), std::get<1>(rec), "data/" + ref.key, sizes, source);
  }, source);
}

}  // namespace

c10::IValue read_torch_save(const std::vector<char>& bytes, const std::string& source) {
  const bool zip = bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K';
  const bool legacy = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 && bytes[1] == 0x02;
  if (!zip && !legacy) throw UserError(source + ": not a torch.save file (neither zip nor legacy pickle format)");
  try {
    RecordSizes sizes;
    c10::IValue value = legacy ? read_legacy_torch_save(bytes, source, &sizes) : read_zip_torch_save(bytes, source, &sizes);
    check_tensors(value, "", sizes, source);  // before any caller copies from a tensor
    return value;
  } catch (const UserError&) {
    throw;
  } catch (const c10::Error& e) {
    throw UserError(source + ": cannot read this torch.save file: " + e.what_without_backtrace());
  } catch (const std::exception& e) {  // LibTorch's zip reader lets std::stoull's out_of_range through
    throw UserError(source + ": cannot read this torch.save file: " + e.what());
  }
}

}  // namespace monoflow::models
