#include "models/pickle_compat.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "common/error.h"

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

std::string patch_ordered_dicts(std::string p, const std::string& source) {
  auto fail = [&](const std::string& what) {
    throw UserError(source + ": unsupported pickle content (" + what +
                    "); in Python, re-save it with torch.save(dict(state_dict), path)");
  };
  // A walk over the pickle program that copies it to `out` while simulating the unpickler's
  // stack: each stack entry remembers where in `out` the bytes that produced it begin, so a
  // finished "OrderedDict()" call can be replaced by an EMPTY_DICT and the argument of a BUILD
  // can be turned into a dict entry.
  enum Kind { kOther, kOdClass, kOdDict };
  struct Entry {
    size_t pos;
    Kind kind;
    std::string puts;  // BINPUTs applied to an OrderedDict class entry
  };
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
  size_t i = 0;
  while (i < p.size()) {
    const unsigned char op = static_cast<unsigned char>(p[i]);
    const size_t here = out.size();
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
        stack.push_back({here, od ? kOdClass : kOther, {}});
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
        break;
      }
      case 'h': case 'j': {                                  // BINGET, LONG_BINGET
        len = op == 'h' ? 2 : 5;
        const uint32_t id = op == 'h' ? static_cast<uint32_t>(arg1()) : read_le(p, i + 1, 4);
        stack.push_back({here, od_memo.count(id) ? kOdClass : kOther, {}});
        break;
      }
      case '(': marks.push_back({stack.size(), here}); break;  // MARK
      case 'X': case 'B': case 'T':                           // BINUNICODE, BINBYTES, BINSTRING
        len = 5 + read_le(p, i + 1, 4);
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

c10::IValue read_torch_save(const std::vector<char>& bytes, const std::string& source) {
  if (bytes.size() < 4 || bytes[0] != 'P' || bytes[1] != 'K') {
    throw UserError(source + ": not a zip-format torch.save file (files written by torch < 1.6 "
                             "or with _use_new_zipfile_serialization=False: load and re-save "
                             "them with a current torch)");
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<VectorReadAdapter>(bytes));
    auto record = reader.getRecord("data.pkl");
    std::string pkl(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
    pkl = patch_ordered_dicts(std::move(pkl), source);
    size_t pos = 0;
    auto read = [&](char* buf, size_t n) {
      n = std::min(n, pkl.size() - pos);
      std::memcpy(buf, pkl.data() + pos, n);
      pos += n;
      return n;
    };
    auto read_record = [&](const std::string& name) {
      return std::get<0>(reader.getRecord("data/" + name));
    };
    torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, c10::Device(c10::kCPU));
    unpickler.set_version(reader.version());
    return unpickler.parse_ivalue();
  } catch (const UserError&) {
    throw;
  } catch (const c10::Error& e) {
    throw UserError(source + ": cannot read this torch.save file: " + e.what_without_backtrace());
  }
}

}  // namespace monoflow::models
