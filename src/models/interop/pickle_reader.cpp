// One file, about 500 lines: the pickle machine is one class whose opcodes share its stack,
// memo and mark list; split, each half would need the other's private state.
#include "models/interop/pickle_reader.h"

#include <ATen/ATen.h>
#include <c10/core/TensorImpl.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "models/interop/numpy_pickle.h"
#include "models/interop/python_object.h"

namespace monoflow::models {
namespace {

constexpr int kMaxDepth = 1000;  // deeper nesting is refused: the final walk recurses

c10::IValue make_object(PythonObject::Kind kind, std::string type) {
  auto o = c10::make_intrusive<PythonObject>();
  o->kind = kind;
  o->type = std::move(type);
  return c10::IValue::make_capsule(std::move(o));
}

PythonObject* mutable_object(const c10::IValue& v) {
  if (!v.isCapsule()) return nullptr;
  return dynamic_cast<PythonObject*>(v.toCapsule().get());
}

// The element type of a typed storage class (torch.FloatStorage, ...), as torch.save names it.
std::optional<at::ScalarType> storage_dtype(const std::string& global) {
  static const std::map<std::string, at::ScalarType> types = {
      {"torch.FloatStorage", at::kFloat},       {"torch.DoubleStorage", at::kDouble},
      {"torch.HalfStorage", at::kHalf},         {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},         {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},       {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},         {"torch.BoolStorage", at::kBool},
      {"torch.ComplexFloatStorage", at::kComplexFloat}, {"torch.ComplexDoubleStorage", at::kComplexDouble},
      {"torch.UntypedStorage", at::kByte}};
  auto it = types.find(global);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

// UTF-8 text whose code points are all below 256 (how pickle protocol 2 carries bytes:
// _codecs.encode(text, 'latin1')) back to those bytes.
std::optional<std::string> latin1_bytes(const std::string& utf8) {
  std::string out;
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
      out += static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3f));
    } else {
      return std::nullopt;
    }
  }
  return out;
}

class Machine {
 public:
  Machine(const std::string& program, size_t start, const StorageLoader& load, const std::string& source)
      : p_(program), pos_(start), load_(load), source_(source) {}

  // The top-level value as the program left it (objects and all).
  c10::IValue run_raw(size_t* end) {
    while (true) {
      need(1);
      op_at_ = pos_;
      const auto op = static_cast<unsigned char>(p_[pos_++]);
      if (op == '.') break;  // STOP
      step(op);
    }
    if (end != nullptr) *end = pos_;
    if (stack_.size() != 1) fail(std::to_string(stack_.size()) + " values left at STOP instead of one");
    return resolve(stack_.back());
  }

  c10::IValue run(size_t* end) {
    const c10::IValue root = run_raw(end);
    if (const PythonObject* o = python_object(root)) {
      throw UserError(source_ + ": holds a pickled Python object (" + o->type +
                      "), not a dict of tensors; torch.save(model) pickles the whole module: in Python, "
                      "save model.state_dict() (or the official {'model': state_dict, ...} dict) instead");
    }
    return finish(root, 0);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(source_ + ": cannot read this torch.save file's pickle (" + what + ", at byte " +
                    std::to_string(op_at_) + ")");
  }
  void need(size_t n) const {
    if (n > p_.size() || pos_ > p_.size() - n) fail("truncated");
  }
  uint64_t le(int n) {
    need(n);
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p_[pos_ + i]);
    pos_ += n;
    return v;
  }
  std::string take(uint64_t n) {
    need(n);
    std::string s = p_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    const size_t nl = p_.find('\n', pos_);
    if (nl == std::string::npos) fail("truncated GLOBAL");
    std::string s = p_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }
  // A little-endian two's-complement integer of n bytes (LONG1, LONG4). Wider than 64 bits (the
  // legacy format's magic number): an opaque int, None in the result.
  c10::IValue long_int(uint64_t n) {
    need(n);
    if (n > 8) {
      pos_ += n;
      return make_object(PythonObject::Kind::kInstance, "builtins.int");
    }
    uint64_t v = 0;
    for (uint64_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p_[pos_ + i])) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(p_[pos_ + n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
    pos_ += n;
    return c10::IValue(static_cast<int64_t>(v));
  }

  void push(c10::IValue v) { stack_.push_back(std::move(v)); }
  c10::IValue pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow");
    c10::IValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  c10::IValue& top() {
    if (stack_.empty()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<c10::IValue> pop_mark() {
    if (marks_.empty()) fail("no MARK");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<c10::IValue> items(std::make_move_iterator(stack_.begin() + at), std::make_move_iterator(stack_.end()));
    stack_.resize(at);
    return items;
  }
  // A value as it now is: an object that BUILD turned into something else (a numpy array).
  static c10::IValue resolve(const c10::IValue& v) {
    const PythonObject* o = python_object(v);
    return o != nullptr && !o->converted.isNone() ? o->converted : v;
  }
  c10::impl::GenericList list_on_top() {  // shares the list on the stack
    if (!top().isList()) fail("APPEND to a " + top().tagKind());
    return top().toList();
  }
  c10::impl::GenericDict dict_on_top() {
    if (!top().isGenericDict()) fail("SETITEM on a " + top().tagKind());
    return top().toGenericDict();
  }
  void set_items(std::vector<c10::IValue> items) {
    if (items.size() % 2 != 0) fail("SETITEMS with an odd number of values");
    auto d = dict_on_top();
    for (size_t i = 0; i < items.size(); i += 2) d.insert_or_assign(std::move(items[i]), std::move(items[i + 1]));
  }
  static c10::IValue new_list(std::vector<c10::IValue> items) {
    c10::impl::GenericList l(c10::AnyType::get());
    for (auto& v : items) l.push_back(std::move(v));
    return l;
  }
  static c10::IValue new_dict() { return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()); }
  void memo_put(uint64_t id) { memo_[id] = top(); }

  void step(unsigned char op) {
    switch (op) {
      case 0x80: le(1); break;                                      // PROTO
      case 0x95: le(8); break;                                      // FRAME (a length hint)
      case '(': marks_.push_back(stack_.size()); break;             // MARK
      case '0':                                                      // POP
        if (!stack_.empty() && (marks_.empty() || stack_.size() > marks_.back())) stack_.pop_back();
        else pop_mark();
        break;
      case '1': pop_mark(); break;                                  // POP_MARK
      case '2': push(top()); break;                                 // DUP
      case 'N': push(c10::IValue()); break;
      case 0x88: push(true); break;
      case 0x89: push(false); break;
      case 'J': push(static_cast<int64_t>(static_cast<int32_t>(le(4)))); break;  // BININT
      case 'K': push(static_cast<int64_t>(le(1))); break;                        // BININT1
      case 'M': push(static_cast<int64_t>(le(2))); break;                        // BININT2
      case 0x8a: { const uint64_t n = le(1); push(long_int(n)); break; }         // LONG1
      case 0x8b: { const uint64_t n = le(4); push(long_int(n)); break; }         // LONG4
      case 'G': {                                                                // BINFLOAT, big-endian
        need(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(p_[pos_ + i]);
        pos_ += 8;
        double d;
        std::memcpy(&d, &bits, 8);
        push(d);
        break;
      }
      case 'X': { const uint64_t n = le(4); push(take(n)); break; }              // BINUNICODE
      case 0x8c: { const uint64_t n = le(1); push(take(n)); break; }             // SHORT_BINUNICODE
      case 0x8d: { const uint64_t n = le(8); push(take(n)); break; }             // BINUNICODE8
      case 'T': { const uint64_t n = le(4); push(take(n)); break; }              // BINSTRING (Python 2 str)
      case 'U': { const uint64_t n = le(1); push(take(n)); break; }              // SHORT_BINSTRING
      case 'B': case 'C': case 0x8e: case 0x96: {                                // BINBYTES, SHORT_, 8, BYTEARRAY8
        const uint64_t n = le(op == 'B' ? 4 : op == 'C' ? 1 : 8);
        auto v = make_object(PythonObject::Kind::kBytes, "builtins.bytes");
        mutable_object(v)->bytes = take(n);
        push(std::move(v));
        break;
      }
      case ')': push(c10::ivalue::Tuple::create(std::vector<c10::IValue>{})); break;
      case 't': push(c10::ivalue::Tuple::create(pop_mark())); break;
      case 0x85: case 0x86: case 0x87: {                                         // TUPLE1..3
        std::vector<c10::IValue> items(op - 0x84);
        for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop();
        push(c10::ivalue::Tuple::create(std::move(items)));
        break;
      }
      case ']': case 0x8f: push(new_list({})); break;                            // EMPTY_LIST, EMPTY_SET
      case 'l': case 0x91: push(new_list(pop_mark())); break;                    // LIST, FROZENSET
      case 'a': { c10::IValue v = pop(); list_on_top().push_back(std::move(v)); break; }  // APPEND
      case 'e': case 0x90: {                                                     // APPENDS, ADDITEMS
        auto items = pop_mark();
        auto l = list_on_top();
        for (auto& v : items) l.push_back(std::move(v));
        break;
      }
      case '}': push(new_dict()); break;
      case 'd': { auto items = pop_mark(); push(new_dict()); set_items(std::move(items)); break; }  // DICT
      case 's': { c10::IValue v = pop(), k = pop(); set_items({std::move(k), std::move(v)}); break; }
      case 'u': set_items(pop_mark()); break;                                    // SETITEMS
      case 'q': memo_put(le(1)); break;                                          // BINPUT
      case 'r': memo_put(le(4)); break;                                          // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); break;                                  // MEMOIZE
      case 'h': case 'j': {                                                      // BINGET, LONG_BINGET
        auto it = memo_.find(le(op == 'h' ? 1 : 4));
        if (it == memo_.end()) fail("a memo slot that was never set");
        push(resolve(it->second));
        break;
      }
      case 'c': {                                                                // GLOBAL module\nname\n
        std::string module = line();
        push(make_object(PythonObject::Kind::kGlobal, module + "." + line()));
        break;
      }
      case 0x93: {                                                               // STACK_GLOBAL
        c10::IValue name = pop(), module = pop();
        if (!name.isString() || !module.isString()) fail("STACK_GLOBAL without two names");
        push(make_object(PythonObject::Kind::kGlobal, module.toStringRef() + "." + name.toStringRef()));
        break;
      }
      case 'Q': { c10::IValue pid = pop(); push(persistent_load(pid)); break; }  // BINPERSID
      case 'R': { c10::IValue args = pop(), fn = pop(); push(call(fn, args)); break; }  // REDUCE
      case 0x81: { c10::IValue args = pop(), cls = pop(); push(instance(cls, args)); break; }  // NEWOBJ
      case 0x92: { pop(); c10::IValue args = pop(), cls = pop(); push(instance(cls, args)); break; }  // NEWOBJ_EX
      case 'b': { c10::IValue state = pop(); build(state); break; }              // BUILD
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%02x", op);
        fail(std::string("opcode 0x") + hex + ", which torch.save does not write");
      }
    }
  }

  const std::string& global_name(const c10::IValue& v, const char* what) const {
    const PythonObject* o = python_object(v);
    if (o == nullptr || o->kind != PythonObject::Kind::kGlobal) fail(std::string(what) + " of a " + v.tagKind());
    return o->type;
  }

  c10::IValue instance(const c10::IValue& cls, c10::IValue args) {
    auto v = make_object(PythonObject::Kind::kInstance, global_name(cls, "NEWOBJ"));
    mutable_object(v)->args = std::move(args);
    return v;
  }

  // REDUCE: the calls torch.save's files make, done here; any other call makes an opaque instance.
  c10::IValue call(const c10::IValue& fn, const c10::IValue& args) {
    const std::string name = global_name(fn, "a call");
    if (!args.isTuple()) fail("call of " + name + " without an argument tuple");
    const auto& a = args.toTupleRef().elements();
    if (name == "collections.OrderedDict") {
      c10::IValue d = new_dict();
      if (!a.empty() && (a[0].isList() || a[0].isTuple())) {
        const auto pairs = a[0].isList() ? a[0].toListRef().vec() : a[0].toTupleRef().elements().vec();
        for (const auto& kv : pairs) {
          if (!kv.isTuple() || kv.toTupleRef().elements().size() != 2) fail("OrderedDict item that is not a pair");
          d.toGenericDict().insert_or_assign(kv.toTupleRef().elements()[0], kv.toTupleRef().elements()[1]);
        }
      }
      return d;
    }
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") return rebuild_tensor(a);
    if ((name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") &&
        !a.empty() && a[0].isTensor()) {
      return a[0];  // an nn.Parameter: its data
    }
    if (name == "torch._tensor._rebuild_from_type_v2" && a.size() >= 3) return call(a[0], a[2]);  // (fn, type, args, state)
    if (name == "_codecs.encode" && a.size() == 2 && a[0].isString() && a[1].isString() &&
        (a[1].toStringRef() == "latin1" || a[1].toStringRef() == "latin-1")) {
      auto bytes = latin1_bytes(a[0].toStringRef());
      if (!bytes) fail("_codecs.encode of text outside latin-1");
      auto v = make_object(PythonObject::Kind::kBytes, "builtins.bytes");
      mutable_object(v)->bytes = std::move(*bytes);
      return v;
    }
    if ((name == "__builtin__.bytes" || name == "builtins.bytes") && a.empty()) {
      return make_object(PythonObject::Kind::kBytes, "builtins.bytes");
    }
    if ((name == "__builtin__.set" || name == "builtins.set" || name == "__builtin__.frozenset" ||
         name == "builtins.frozenset") && a.size() == 1 && a[0].isList()) {
      return new_list(a[0].toListRef().vec());
    }
    if (is_numpy_scalar_constructor(name) && a.size() == 2) {
      if (const PythonObject* raw = python_object(a[1])) {
        if (auto v = numpy_scalar(a[0], *raw)) return *v;
      }
    }
    auto v = make_object(PythonObject::Kind::kInstance, name);
    mutable_object(v)->args = args;
    return v;
  }

  // BUILD: an instance keeps its state (a numpy array becomes its tensor); the attributes set
  // on anything else (an OrderedDict's _metadata) are dropped.
  void build(const c10::IValue& state) {
    PythonObject* o = mutable_object(top());
    if (o == nullptr || o->kind != PythonObject::Kind::kInstance) return;
    o->state = state;
    if (is_numpy_array_constructor(o->type)) {
      if (auto t = numpy_array(state)) {
        o->converted = *t;
        top() = *t;
      }
    }
  }

  // ('storage', torch.<T>Storage, key, location, numel[, view metadata]): the storage, shared
  // by every tensor that names the same key.
  c10::IValue persistent_load(const c10::IValue& pid) {
    if (!pid.isTuple()) fail("a persistent id that is not a tuple");
    const auto& e = pid.toTupleRef().elements();
    if (e.size() < 5 || !e[0].isString() || e[0].toStringRef() != "storage" || !e[2].isString() || !e[4].isInt()) {
      fail("a persistent id other than ('storage', type, key, location, numel)");
    }
    if (e.size() > 5 && !e[5].isNone()) fail("a storage view (written by torch before 0.4)");
    const std::string& type = global_name(e[1], "storage type");
    const auto dtype = storage_dtype(type);
    if (!dtype) fail("storage type " + type);
    const std::string& key = e[2].toStringRef();
    auto it = storages_.find(key);
    if (it == storages_.end()) {
      if (!load_) fail("a tensor where none is expected");
      if (e[4].toInt() < 0) fail("storage '" + key + "' of negative size");
      it = storages_.emplace(key, std::make_pair(load_({key, *dtype, e[4].toInt()}), *dtype)).first;
    } else if (it->second.second != *dtype) {
      fail("storage '" + key + "' named with two element types");
    }
    auto v = make_object(PythonObject::Kind::kInstance, type);
    mutable_object(v)->state = c10::IValue(it->second.first);
    return v;
  }

  std::vector<int64_t> int_tuple(const c10::IValue& v, const char* what) const {
    if (!v.isTuple()) fail(std::string("a tensor whose ") + what + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto& x : v.toTupleRef().elements()) {
      if (!x.isInt()) fail(std::string("a tensor whose ") + what + " holds a " + x.tagKind());
      out.push_back(x.toInt());
    }
    return out;
  }

  // (storage, offset, size, stride, ...): a tensor over the storage, as the file states it;
  // whether it fits in its storage is checked after the whole file is read (check_tensors).
  c10::IValue rebuild_tensor(const std::vector<c10::IValue>& a) {
    const PythonObject* s = a.empty() ? nullptr : python_object(a[0]);
    if (s == nullptr || !s->state.isStorage() || a.size() < 4 || !a[1].isInt()) fail("a malformed tensor");
    const auto dtype = storage_dtype(s->type);
    const auto sizes = int_tuple(a[2], "shape"), strides = int_tuple(a[3], "strides");
    if (sizes.size() != strides.size()) fail("a tensor with " + std::to_string(sizes.size()) + " sizes but " +
                                             std::to_string(strides.size()) + " strides");
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(s->state.toStorage()),
                                                     c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     caffe2::TypeMeta::fromScalarType(*dtype));
    impl->set_storage_offset(a[1].toInt());
    impl->set_sizes_and_strides(sizes, strides);
    return at::Tensor(std::move(impl));
  }

  // The result without the reader's own objects: each becomes what BUILD made of it, or None.
  // A container the program shares (a memo slot fetched again) is converted once and stays
  // shared, as in Python: a program that nests shared lists n deep then costs n steps, not 2^n.
  c10::IValue finish(const c10::IValue& in, int depth) {
    if (depth > kMaxDepth) fail("values nested deeper than " + std::to_string(kMaxDepth) + " levels");
    const c10::IValue v = resolve(in);
    if (python_object(v) != nullptr) return c10::IValue();
    if (!v.isGenericDict() && !v.isList() && !v.isTuple()) return v;
    // The input containers stay alive (reachable from the root) while this runs, so their
    // addresses name them.
    const void* const key = v.internalToPointer();
    if (const auto it = finished_.find(key); it != finished_.end()) return it->second;
    c10::IValue out;
    if (v.isGenericDict()) {
      auto dict = c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
      for (const auto& kv : v.toGenericDict()) dict.insert_or_assign(finish(kv.key(), depth + 1), finish(kv.value(), depth + 1));
      out = dict;
    } else if (v.isList()) {
      c10::impl::GenericList list(c10::AnyType::get());
      for (const auto& x : v.toListRef()) list.push_back(finish(x, depth + 1));
      out = list;
    } else {
      std::vector<c10::IValue> elements;
      for (const auto& x : v.toTupleRef().elements()) elements.push_back(finish(x, depth + 1));
      out = c10::ivalue::Tuple::create(std::move(elements));
    }
    finished_.emplace(key, out);
    return out;
  }

  const std::string& p_;
  size_t pos_, op_at_ = 0;
  const StorageLoader& load_;
  const std::string& source_;
  std::vector<c10::IValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, c10::IValue> memo_;
  std::unordered_map<const void*, c10::IValue> finished_;  // finish()'s converted containers
  std::map<std::string, std::pair<c10::Storage, at::ScalarType>> storages_;
};

// Every tensor under `v`, named by its path of attribute names, dict keys and list indices;
// an object's attributes are its BUILD state. Shared values are walked once per path, within
// a budget, so that a program that nests shared lists cannot make the walk exponential.
void collect_tensors(const c10::IValue& in, const std::string& path, int depth, int64_t& budget,
                     std::vector<std::pair<std::string, at::Tensor>>& out, const std::string& source) {
  if (depth > kMaxDepth || --budget < 0) {
    throw UserError(source + ": cannot read this pickle (values nested deeper than " + std::to_string(kMaxDepth) +
                    " levels, or too many of them)");
  }
  const PythonObject* o = python_object(in);
  const c10::IValue v = o != nullptr && !o->converted.isNone() ? o->converted : in;
  if (const PythonObject* obj = python_object(v)) {
    if (obj->kind == PythonObject::Kind::kInstance && !obj->state.isStorage()) {
      collect_tensors(obj->state, path, depth + 1, budget, out, source);
    }
  } else if (v.isTensor()) {
    out.emplace_back(path, v.toTensor());
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) {
      const std::string key = kv.key().isString() ? kv.key().toStringRef() : kv.key().isInt() ? std::to_string(kv.key().toInt()) : "?";
      collect_tensors(kv.value(), path.empty() ? key : path + "." + key, depth + 1, budget, out, source);
    }
  } else if (v.isList() || v.isTuple()) {
    const auto elements = v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
    for (size_t i = 0; i < elements.size(); ++i) {
      collect_tensors(elements[i], path + "[" + std::to_string(i) + "]", depth + 1, budget, out, source);
    }
  }
}

}  // namespace

std::vector<PickledTensor> pickled_tensors(const std::string& program, const StorageLoader& load,
                                           const std::string& source) {
  std::map<const c10::StorageImpl*, StorageRef> refs;
  const StorageLoader remember = [&](const StorageRef& ref) {
    c10::Storage s = load(ref);
    refs[s.unsafeGetStorageImpl()] = ref;
    return s;
  };
  const c10::IValue root = Machine(program, 0, remember, source).run_raw(nullptr);
  std::vector<std::pair<std::string, at::Tensor>> found;
  int64_t budget = 1 << 20;
  collect_tensors(root, "", 0, budget, found, source);
  std::vector<PickledTensor> out;
  for (auto& [path, t] : found) {
    auto it = refs.find(t.storage().unsafeGetStorageImpl());
    if (it == refs.end()) continue;  // not from a persistent id (cannot happen: tensors come from storages)
    out.push_back({path, t, it->second});
  }
  return out;
}

c10::IValue unpickle(const std::string& program, size_t start, size_t* end, const StorageLoader& load,
                     const std::string& source) {
  return Machine(program, start, load, source).run(end);
}

}  // namespace monoflow::models
