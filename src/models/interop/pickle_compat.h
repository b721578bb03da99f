// Reading and writing Python torch.save files from C++: the containers (the zip archive of
// torch >= 1.6, the legacy stream before it) and their storages; the pickle inside is run by
// pickle_reader.h, which also reads what the official Glow-TTS checkpoints hold besides tensors
// (the optimizer's state, numpy scalars).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace monoflow::models {

// Loads the object saved by Python's torch.save from `bytes`: the zip format (torch >= 1.6)
// or the legacy format (older torch, or _use_new_zipfile_serialization=False); tensors are
// on the CPU, each checked to lie inside its storage. `source` names the file in error
// messages (UserError/FileError).
c10::IValue read_torch_save(const std::vector<char>& bytes, const std::string& source);

// Serialises `value` the way Python's torch.save does (zip archive, pickle protocol 2, one
// storage record per tensor, tensors rebuilt by torch._utils._rebuild_tensor_v2), so that
// torch.load reads it with its default weights_only=True. Supports dicts (string keys keep
// their insertion order), lists, tuples, tensors (stored contiguous, on the CPU), ints,
// doubles, strings, bools and None. (torch::pickle_save's output needs weights_only=False
// in Python, because it tags container types with torch.jit._pickle.restore_type_tag.)
std::vector<char> write_torch_save(const c10::IValue& value);

}  // namespace monoflow::models
