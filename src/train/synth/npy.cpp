#include "train/synth/npy.h"

#include <cstring>

namespace monoflow::train {

std::string encode_npy_float32(const torch::Tensor& t) {
  const torch::Tensor data = t.to(torch::kCPU, torch::kFloat32).contiguous();
  std::string shape;  // a Python tuple: "(80, 431)", "(5,)"
  for (int64_t d = 0; d < data.dim(); ++d) shape += (d ? ", " : "") + std::to_string(data.size(d));
  shape = "(" + shape + (data.dim() == 1 ? ",)" : ")");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
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
  const size_t bytes = static_cast<size_t>(data.numel()) * sizeof(float);
  const size_t at = out.size();
  out.resize(at + bytes);
  if (bytes) std::memcpy(&out[at], data.data_ptr<float>(), bytes);  // the host is little-endian (x86-64, arm64)
  return out;
}

}  // namespace monoflow::train
