// Checks a LibTorch archive (our checkpoints: torch::serialize::OutputArchive; TorchScript
// files) before LibTorch reads it. LibTorch's unpickler trusts what the pickle states: it
// gives each storage the size the pickle declares over a buffer of the record's size (and
// copies that many bytes when loading onto a GPU), and builds tensors at any offset. So a
// CRC-valid archive with a crafted or buggy pickle could make it read past a buffer.
#pragma once

#include <caffe2/serialize/inline_container.h>

#include <string>

namespace monoflow::models {

// For data.pkl and constants.pkl (when present): every storage the pickle names has its
// record (data/<key>, constants/<key>) and that record holds at least the declared bytes, and
// every tensor lies inside its storage (common/tensor_bounds.h). Throws FileError(source,
// "corrupt file: tensor 'model.encoder.w': ...") naming the tensor by its attribute path, or
// for a malformed pickle. Reads the pickles and record sizes only, not the tensor data.
void check_libtorch_archive(caffe2::serialize::PyTorchStreamReader& reader, const std::string& source);

}  // namespace monoflow::models
