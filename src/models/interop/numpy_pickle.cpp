#include "models/interop/numpy_pickle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

namespace monoflow::models {
namespace {

// A numpy dtype as pickled: numpy.dtype('f8', False, True), then BUILD with a state tuple
// whose second item is the byte order ('<', '>', '|' or '=').
struct NumpyType {
  char kind = 0;    // 'b' bool, 'i' signed, 'u' unsigned, 'f' float
  int size = 0;     // bytes per element
  bool swap = false;  // stored in the other byte order than this machine's
};

bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

std::optional<NumpyType> numpy_type(const c10::IValue& dtype) {
  const PythonObject* o = python_object(dtype);
  if (o == nullptr || o->kind != PythonObject::Kind::kInstance || o->type != "numpy.dtype" || !o->args.isTuple()) {
    return std::nullopt;
  }
  const auto& args = o->args.toTupleRef().elements();
  if (args.empty() || !args[0].isString()) return std::nullopt;
  std::string code = args[0].toStringRef();
  char order = '=';
  if (o->state.isTuple()) {
    const auto& s = o->state.toTupleRef().elements();
    if (s.size() > 1 && s[1].isString() && !s[1].toStringRef().empty()) order = s[1].toStringRef()[0];
  }
  if (!code.empty() && std::string("<>=|").find(code[0]) != std::string::npos) {
    order = code[0];
    code = code.substr(1);
  }
  static const std::map<std::string, std::pair<char, int>> known = {
      {"b1", {'b', 1}}, {"i1", {'i', 1}}, {"i2", {'i', 2}}, {"i4", {'i', 4}}, {"i8", {'i', 8}},
      {"u1", {'u', 1}}, {"u2", {'u', 2}}, {"u4", {'u', 4}}, {"u8", {'u', 8}},
      {"f2", {'f', 2}}, {"f4", {'f', 4}}, {"f8", {'f', 8}}};
  auto it = known.find(code);
  if (it == known.end()) return std::nullopt;
  NumpyType t;
  t.kind = it->second.first;
  t.size = it->second.second;
  const bool little = host_is_little_endian();
  t.swap = t.size > 1 && ((order == '<' && !little) || (order == '>' && little));
  return t;
}

// The torch dtype of a numpy array's elements (unsigned wider than a byte: none that
// LibTorch computes with, so such arrays stay unread).
std::optional<at::ScalarType> torch_type(const NumpyType& t) {
  switch (t.kind) {
    case 'b': return at::kBool;
    case 'u': return t.size == 1 ? std::optional<at::ScalarType>(at::kByte) : std::nullopt;
    case 'i': return t.size == 1 ? at::kChar : t.size == 2 ? at::kShort : t.size == 4 ? at::kInt : at::kLong;
    case 'f': return t.size == 2 ? at::kHalf : t.size == 4 ? at::kFloat : at::kDouble;
    default: return std::nullopt;
  }
}

void swap_elements(char* data, size_t count, int size) {
  for (size_t i = 0; i < count; ++i) std::reverse(data + i * size, data + (i + 1) * size);
}

}  // namespace

bool is_numpy_scalar_constructor(const std::string& global) {
  return global == "numpy.core.multiarray.scalar" || global == "numpy._core.multiarray.scalar";
}

bool is_numpy_array_constructor(const std::string& global) {
  return global == "numpy.core.multiarray._reconstruct" || global == "numpy._core.multiarray._reconstruct";
}

std::optional<c10::IValue> numpy_scalar(const c10::IValue& dtype, const PythonObject& bytes) {
  const auto t = numpy_type(dtype);
  if (!t || bytes.kind != PythonObject::Kind::kBytes || bytes.bytes.size() != static_cast<size_t>(t->size)) {
    return std::nullopt;
  }
  char raw[8];
  std::memcpy(raw, bytes.bytes.data(), t->size);
  if (t->swap) swap_elements(raw, 1, t->size);
  switch (t->kind) {
    case 'b': return c10::IValue(raw[0] != 0);
    case 'i': {
      int64_t v = 0;
      if (t->size == 1) { int8_t x; std::memcpy(&x, raw, 1); v = x; }
      if (t->size == 2) { int16_t x; std::memcpy(&x, raw, 2); v = x; }
      if (t->size == 4) { int32_t x; std::memcpy(&x, raw, 4); v = x; }
      if (t->size == 8) std::memcpy(&v, raw, 8);
      return c10::IValue(v);
    }
    case 'u': {
      uint64_t v = 0;
      std::memcpy(&v, raw, t->size);  // little-endian host: the low bytes
      if (!host_is_little_endian() || v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return c10::IValue(static_cast<int64_t>(v));
    }
    case 'f': {
      if (t->size == 2) { c10::Half h; std::memcpy(&h, raw, 2); return c10::IValue(static_cast<double>(static_cast<float>(h))); }
      if (t->size == 4) { float f; std::memcpy(&f, raw, 4); return c10::IValue(static_cast<double>(f)); }
      double d;
      std::memcpy(&d, raw, 8);
      return c10::IValue(d);
    }
    default: return std::nullopt;
  }
}

std::optional<c10::IValue> numpy_array(const c10::IValue& state) {
  if (!state.isTuple()) return std::nullopt;
  const auto& s = state.toTupleRef().elements();  // (version, shape, dtype, is_fortran, raw)
  if (s.size() != 5 || !s[1].isTuple() || !s[3].isBool()) return std::nullopt;
  const auto t = numpy_type(s[2]);
  const PythonObject* raw = python_object(s[4]);
  if (!t || raw == nullptr || raw->kind != PythonObject::Kind::kBytes) return std::nullopt;
  const auto dtype = torch_type(*t);
  if (!dtype) return std::nullopt;
  std::vector<int64_t> shape;
  uint64_t count = 1;
  for (const auto& d : s[1].toTupleRef().elements()) {
    if (!d.isInt() || d.toInt() < 0) return std::nullopt;
    shape.push_back(d.toInt());
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(d.toInt()), &count)) return std::nullopt;
  }
  if (count * t->size != raw->bytes.size()) return std::nullopt;
  const bool fortran = s[3].toBool();
  std::vector<int64_t> stored = shape;  // Fortran order: the reversed shape, row-major
  if (fortran) std::reverse(stored.begin(), stored.end());
  at::Tensor out = at::empty(stored, at::TensorOptions().dtype(*dtype));
  std::memcpy(out.data_ptr(), raw->bytes.data(), raw->bytes.size());
  if (t->swap) swap_elements(static_cast<char*>(out.data_ptr()), count, t->size);
  if (fortran && out.dim() > 1) {
    std::vector<int64_t> reversed(out.dim());
    for (int64_t i = 0; i < out.dim(); ++i) reversed[i] = out.dim() - 1 - i;
    out = out.permute(reversed).contiguous();
  }
  return c10::IValue(out);
}

}  // namespace monoflow::models
