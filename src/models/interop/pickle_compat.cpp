#include "models/interop/pickle_compat.h"

#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "common/error.h"
#include "common/tensor_bounds.h"
#include "common/zip_integrity.h"

namespace monoflow::models {
namespace {

// Opcodes of pickle protocols 0-4 that torch.save can emit for state dicts and
// checkpoint dicts (tensors, numbers, strings, tuples, lists, dicts, None, bools).
uint32_t read_le(const std::string& s, size_t pos, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s.at(pos + i));
  return v;
}

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

// The walker behind patch_ordered_dicts. Reads one pickle program from p[start...]; sets
// *end to the offset after its STOP; records, in storage_types, the storage class named
// next to each storage key (persistent ids ('storage', torch.<T>Storage, key, ...)).
std::string patch_pickle(const std::string& p, size_t start, size_t* end,
                         std::map<std::string, std::string>* storage_types, const std::string& source) {
  auto fail = [&](const std::string& what) {
    throw UserError(source + ": unsupported pickle content (" + what +
                    "); in Python, re-save it with torch.save(dict(state_dict), path)");
  };
  // A walk over the pickle program that copies it to `out` while simulating the unpickler's
  // stack: each stack entry remembers where in `out` the bytes that produced it begin, so a
  // finished "OrderedDict()" call can be replaced by an EMPTY_DICT and the argument of a BUILD
  // can be turned into a dict entry.
  enum Kind { kOther, kOdClass, kOdDict, kStorageClass };
  struct Entry {
    size_t pos;
    Kind kind;
    std::string puts;  // BINPUTs applied to an OrderedDict class entry; storage class name
  };
  std::map<uint32_t, std::string> storage_memo;  // memo slots holding a torch.<T>Storage class
  std::string pending_storage;                   // class just pushed: the next string is its key
  struct Mark {
    size_t stack_size, pos;
  };
  std::vector<Entry> stack;
  std::vector<Mark> marks;
  std::set<uint32_t> od_memo;  // memo slots that hold the OrderedDict class
  std::string out;
  out.reserve(p.size() + 64);
  auto need = [&](size_t n) {
    if (stack.size() < n) fail("malformed stack");
  };
  auto pop_to_mark = [&]() -> size_t {
    if (marks.empty()) fail("missing MARK");
    Mark m = marks.back();
    marks.pop_back();
    if (stack.size() < m.stack_size) fail("malformed MARK");
    stack.resize(m.stack_size);
    return m.pos;
  };
  size_t i = start;
  while (i < p.size()) {
    const unsigned char op = static_cast<unsigned char>(p[i]);
    const size_t here = out.size();
    if (op != 'q' && op != 'r' && op != 'X' && op != 'c' && op != 'h' && op != 'j') pending_storage.clear();
    size_t len = 1;  // bytes of this opcode including its argument
    auto arg1 = [&]() { return static_cast<size_t>(static_cast<unsigned char>(p.at(i + 1))); };
    switch (op) {
      case 0x80: len = 2; break;                             // PROTO
      case 'c': {                                            // GLOBAL module\nname\n
        size_t a = p.find('\n', i + 1);
        size_t b = a == std::string::npos ? a : p.find('\n', a + 1);
        if (b == std::string::npos) fail("truncated GLOBAL");
        const bool od = p.compare(i + 1, a - i - 1, "collections") == 0 &&
                        p.compare(a + 1, b - a - 1, "OrderedDict") == 0;
        len = b + 1 - i;
        const bool storage = p.compare(i + 1, a - i - 1, "torch") == 0 && b - a - 1 > 7 &&
                             p.compare(b - 7, 7, "Storage") == 0;
        if (storage) {
          pending_storage = p.substr(a + 1, b - a - 1);
          stack.push_back({here, kStorageClass, pending_storage});
        } else {
          pending_storage.clear();
          stack.push_back({here, od ? kOdClass : kOther, {}});
        }
        break;
      }
      case 'q': case 'r': {                                  // BINPUT, LONG_BINPUT
        len = op == 'q' ? 2 : 5;
        const uint32_t id = op == 'q' ? static_cast<uint32_t>(arg1()) : read_le(p, i + 1, 4);
        need(1);
        if (stack.back().kind == kOdClass) {
          od_memo.insert(id);
          stack.back().puts += p.substr(i, len);
        } else {
          od_memo.erase(id);
        }
        if (stack.back().kind == kStorageClass) storage_memo[id] = stack.back().puts;
        else storage_memo.erase(id);
        break;
      }
      case 'h': case 'j': {                                  // BINGET, LONG_BINGET
        len = op == 'h' ? 2 : 5;
        const uint32_t id = op == 'h' ? static_cast<uint32_t>(arg1()) : read_le(p, i + 1, 4);
        auto sm = storage_memo.find(id);
        if (sm != storage_memo.end()) {
          pending_storage = sm->second;
          stack.push_back({here, kStorageClass, sm->second});
        } else {
          pending_storage.clear();
          stack.push_back({here, od_memo.count(id) ? kOdClass : kOther, {}});
        }
        break;
      }
      case '(': marks.push_back({stack.size(), here}); break;  // MARK
      case 'X': case 'B': case 'T':                           // BINUNICODE, BINBYTES, BINSTRING
        len = 5 + read_le(p, i + 1, 4);
        if (op == 'X' && !pending_storage.empty() && storage_types && i + len <= p.size()) {
          (*storage_types)[p.substr(i + 5, len - 5)] = pending_storage;
        }
        pending_storage.clear();
        stack.push_back({here, kOther, {}});
        break;
      case 'C': case 'U': case 0x8a:                          // SHORT_BINBYTES, SHORT_BINSTRING, LONG1
        len = 2 + arg1();
        stack.push_back({here, kOther, {}});
        break;
      case 'K': len = 2; stack.push_back({here, kOther, {}}); break;  // BININT1
      case 'M': len = 3; stack.push_back({here, kOther, {}}); break;  // BININT2
      case 'J': len = 5; stack.push_back({here, kOther, {}}); break;  // BININT
      case 'G': len = 9; stack.push_back({here, kOther, {}}); break;  // BINFLOAT
      case ')': case '}': case ']': case 'N': case 0x88: case 0x89:   // empty tuple/dict/list,
        stack.push_back({here, kOther, {}});                          // None, True, False
        break;
      case 't': case 'l': case 'd': {                        // TUPLE, LIST, DICT
        size_t pos = pop_to_mark();
        stack.push_back({pos, kOther, {}});
        break;
      }
      case 0x85: case 0x86: case 0x87: {                     // TUPLE1..3
        size_t n = op - 0x84;
        need(n);
        size_t pos = stack[stack.size() - n].pos;
        stack.resize(stack.size() - n);
        stack.push_back({pos, kOther, {}});
        break;
      }
      case 'a': need(2); stack.pop_back(); break;            // APPEND
      case 'e': case 'u': pop_to_mark(); need(1); break;     // APPENDS, SETITEMS
      case 's': need(3); stack.resize(stack.size() - 2); break;  // SETITEM
      case 'Q': need(1); stack.back().kind = kOther; break;  // BINPERSID
      case 'R': {                                            // REDUCE
        need(2);
        Entry arg = stack.back();
        stack.pop_back();
        Entry fn = stack.back();
        stack.pop_back();
        if (fn.kind == kOdClass) {
          if (out.size() != arg.pos + 1 || out[arg.pos] != ')') fail("OrderedDict with arguments");
          out.resize(fn.pos);
          out += '}';
          out += fn.puts;
          stack.push_back({fn.pos, kOdDict, {}});
          i += 1;
          continue;
        }
        stack.push_back({fn.pos, kOther, {}});
        break;
      }
      case 'b': {                                            // BUILD
        need(2);
        Entry state = stack.back();
        stack.pop_back();
        if (stack.back().kind != kOdDict) fail("BUILD on an object");
        // obj.__setstate__(state) becomes obj["__state__"] = state
        static const std::string key = "__state__";
        std::string put = "X";
        for (int k = 0; k < 4; ++k) put += static_cast<char>((key.size() >> (8 * k)) & 0xff);
        put += key;
        out.insert(state.pos, put);
        out += 's';
        i += 1;
        continue;
      }
      case '.':                                              // STOP
        out += '.';
        if (stack.size() != 1) fail("malformed stack at STOP");
        if (end) *end = i + 1;
        return out;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%02x", op);
        fail(std::string("opcode 0x") + buf);
      }
    }
    if (i + len > p.size()) fail("truncated opcode");
    out.append(p, i, len);
    i += len;
  }
  fail("no STOP opcode");
  return out;
}

}  // namespace

std::string patch_ordered_dicts(std::string p, const std::string& source) {
  return patch_pickle(p, 0, nullptr, nullptr, source);
}

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

int64_t storage_element_size(const std::string& type, const std::string& source) {
  static const std::map<std::string, int64_t> sizes = {
      {"FloatStorage", 4}, {"DoubleStorage", 8}, {"HalfStorage", 2}, {"BFloat16Storage", 2},
      {"LongStorage", 8},  {"IntStorage", 4},    {"ShortStorage", 2}, {"CharStorage", 1},
      {"ByteStorage", 1},  {"BoolStorage", 1},   {"ComplexFloatStorage", 8}, {"ComplexDoubleStorage", 16}};
  auto it = sizes.find(type);
  if (it == sizes.end()) throw UserError(source + ": unsupported storage type torch." + type);
  return it->second;
}

c10::IValue unpickle(const std::string& pkl, std::function<at::DataPtr(const std::string&)> read_record,
                     std::optional<uint64_t> version) {
  size_t pos = 0;
  auto read = [&](char* buf, size_t n) {
    n = std::min(n, pkl.size() - pos);
    std::memcpy(buf, pkl.data() + pos, n);
    pos += n;
    return n;
  };
  torch::jit::Unpickler unpickler(read, nullptr, nullptr, std::move(read_record), c10::Device(c10::kCPU));
  if (version) unpickler.set_version(*version);
  return unpickler.parse_ivalue();
}

// torch.save's format before torch 1.6 (and with _use_new_zipfile_serialization=False): the
// pickles magic number, protocol version, sys_info and the object, then the pickled sorted
// list of storage keys, then per key an int64 element count and the raw little-endian data.
// The storage records handed to the unpickler: data pointer -> (record name, bytes).
using RecordSizes = std::map<const void*, std::pair<std::string, size_t>>;

c10::IValue read_legacy_torch_save(const std::vector<char>& bytes, const std::string& source,
                                   RecordSizes* sizes) {
  const std::string all(bytes.begin(), bytes.end());
  size_t pos = 0, end = 0;
  for (int i = 0; i < 3; ++i) {  // magic number, protocol version, sys_info
    patch_pickle(all, pos, &end, nullptr, source);
    pos = end;
  }
  std::map<std::string, std::string> storage_types;
  const std::string main = patch_pickle(all, pos, &end, &storage_types, source);
  pos = end;
  const std::string keys_pkl = patch_pickle(all, pos, &end, nullptr, source);
  pos = end;
  auto keys = unpickle(keys_pkl, nullptr, std::nullopt);
  if (!keys.isList()) throw UserError(source + ": legacy torch.save file without a storage key list");
  std::map<std::string, std::pair<size_t, size_t>> records;  // key -> (offset, bytes) in `all`
  for (const auto& k : keys.toListRef()) {
    const std::string key = k.toStringRef();
    auto type = storage_types.find(key);
    if (type == storage_types.end()) throw UserError(source + ": storage " + key + " has no type");
    if (pos + 8 > all.size()) throw UserError(source + ": truncated storage data");
    int64_t numel = 0;
    std::memcpy(&numel, all.data() + pos, 8);
    pos += 8;
    const int64_t nbytes = numel * storage_element_size(type->second, source);
    if (numel < 0 || pos + static_cast<size_t>(nbytes) > all.size()) throw UserError(source + ": truncated storage data");
    records.emplace(key, std::make_pair(pos, static_cast<size_t>(nbytes)));
    pos += nbytes;
  }
  return unpickle(main, [&](const std::string& key) -> at::DataPtr {
    auto it = records.find(key);
    TORCH_CHECK(it != records.end(), "storage ", key, " missing");
    auto ptr = c10::GetCPUAllocator()->allocate(it->second.second);  // a copy per reference, as for zip records
    std::memcpy(ptr.get(), all.data() + it->second.first, it->second.second);
    (*sizes)[ptr.get()] = {key, it->second.second};
    return ptr;
  }, std::nullopt);
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
    const uint64_t held = rec == records.end() ? 0 : rec->second.second;
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
  std::string pkl(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
  pkl = patch_ordered_dicts(std::move(pkl), source);
  return unpickle(pkl, [&](const std::string& name) {
    auto rec = reader.getRecord("data/" + name);
    (*sizes)[std::get<0>(rec).get()] = {"data/" + name, std::get<1>(rec)};
    return std::move(std::get<0>(rec));
  }, reader.version());
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
  }
}

}  // namespace monoflow::models
