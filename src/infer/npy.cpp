#include "infer/npy.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace monoflow::train {
namespace {

// `data` is a contiguous CPU tensor of the dtype `descr` names ('<f4', '<i4').
std::string encode_npy(const torch::Tensor& data, const std::string& descr) {
  std::string shape;  // a Python tuple: "(80, 431)", "(5,)"
  for (int64_t d = 0; d < data.dim(); ++d) shape += (d ? ", " : "") + std::to_string(data.size(d));
  shape = "(" + shape + (data.dim() == 1 ? ",)" : ")");
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces and ended by a
  // newline to a multiple of 64 bytes, as the format asks.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + std::string("\x01\x00", 2);
  const uint16_t length = static_cast<uint16_t>(header.size());
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>(length >> 8);
  out += header;
  const size_t bytes = static_cast<size_t>(data.numel()) * data.element_size();
  const size_t at = out.size();
  out.resize(at + bytes);
  if (bytes) std::memcpy(&out[at], data.data_ptr(), bytes);  // the host is little-endian (x86-64, arm64)
  return out;
}

// The value of 'key': ... in the header dict, up to the next top-level comma.
std::string header_field(const std::string& header, const std::string& key) {
  const size_t at = header.find("'" + key + "':");
  if (at == std::string::npos) return "";
  size_t b = at + key.size() + 3;
  while (b < header.size() && header[b] == ' ') ++b;
  size_t e = b;
  int depth = 0;
  while (e < header.size() && (depth > 0 || (header[e] != ',' && header[e] != '}'))) {
    if (header[e] == '(') ++depth;
    if (header[e] == ')') --depth;
    ++e;
  }
  return header.substr(b, e - b);
}

}  // namespace

std::string encode_npy_float32(const torch::Tensor& t) {
  return encode_npy(t.to(torch::kCPU, torch::kFloat32).contiguous(), "<f4");
}

std::string encode_npy_int32(const torch::Tensor& t) {
  return encode_npy(t.to(torch::kCPU, torch::kInt32).contiguous(), "<i4");
}

torch::Tensor decode_npy(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 10 || bytes.compare(0, 6, std::string("\x93NUMPY", 6)) != 0 || bytes[6] != 1) {
    throw FileError(source, 0, "not a version 1.0 .npy file");
  }
  const size_t header_size = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  if (bytes.size() < 10 + header_size) throw FileError(source, 0, "truncated .npy header");
  const std::string header = bytes.substr(10, header_size);
  const std::string descr = header_field(header, "descr");
  torch::Dtype dtype;
  if (descr == "'<f4'") {
    dtype = torch::kFloat32;
  } else if (descr == "'<i4'") {
    dtype = torch::kInt32;
  } else {
    throw FileError(source, 0, "unsupported .npy dtype " + descr + " (float32 '<f4' and int32 '<i4' are read)");
  }
  if (header_field(header, "fortran_order") != "False") throw FileError(source, 0, "Fortran-order .npy is not read");
  std::vector<int64_t> shape;
  const std::string tuple = header_field(header, "shape");
  if (tuple.size() < 2 || tuple.front() != '(' || tuple.back() != ')') {
    throw FileError(source, 0, "bad .npy shape " + tuple);
  }
  int64_t numel = 1;
  for (size_t i = 1; i + 1 < tuple.size();) {
    while (i + 1 < tuple.size() && (tuple[i] == ' ' || tuple[i] == ',')) ++i;
    if (i + 1 >= tuple.size()) break;
    char* end = nullptr;
    const long long d = std::strtoll(tuple.c_str() + i, &end, 10);
    if (end == tuple.c_str() + i || d < 0) throw FileError(source, 0, "bad .npy shape " + tuple);
    shape.push_back(d);
    numel *= d;
    i = static_cast<size_t>(end - tuple.c_str());
  }
  const size_t data_bytes = static_cast<size_t>(numel) * 4;
  if (bytes.size() != 10 + header_size + data_bytes) {
    throw FileError(source, 0, "the .npy data holds " + std::to_string(bytes.size() - 10 - header_size) +
                                   " bytes; its shape " + tuple + " needs " + std::to_string(data_bytes));
  }
  torch::Tensor t = torch::empty(shape, dtype);
  if (data_bytes) std::memcpy(t.data_ptr(), bytes.data() + 10 + header_size, data_bytes);
  return t;
}

}  // namespace monoflow::train
