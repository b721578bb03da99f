// Reading Python torch.save files (zip format) from C++.
//
// LibTorch's unpickler turns a `collections.OrderedDict` into None, so a plain
// torch.save(model.state_dict()) -- an OrderedDict carrying a `_metadata` attribute --
// cannot be read with torch::pickle_load. read_torch_save() rewrites the pickle program
// before unpickling it: every `OrderedDict()` construction becomes an empty dict, and
// BUILD (which would set attributes such as `_metadata` on the dict) drops its argument.
// Opcode lengths stay the same, so nothing else in the stream moves.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace monoflow::models {

// Rewrites a protocol-2 pickle program as described above (exposed for tests).
// Throws monoflow::UserError naming `source` if the program uses an opcode it does not know.
std::string patch_ordered_dicts(std::string pickle, const std::string& source);

// Loads the object saved by Python's torch.save from `bytes`: the zip format (torch >= 1.6)
// or the legacy format (older torch, or _use_new_zipfile_serialization=False); tensors are
// on the CPU. `source` names the file in error messages.
c10::IValue read_torch_save(const std::vector<char>& bytes, const std::string& source);

// Serialises `value` the way Python's torch.save does (zip archive, pickle protocol 2, one
// storage record per tensor, tensors rebuilt by torch._utils._rebuild_tensor_v2), so that
// torch.load reads it with its default weights_only=True. Supports dicts (string keys keep
// their insertion order), lists, tuples, tensors (stored contiguous, on the CPU), ints,
// doubles, strings, bools and None. (torch::pickle_save's output needs weights_only=False
// in Python, because it tags container types with torch.jit._pickle.restore_type_tag.)
std::vector<char> write_torch_save(const c10::IValue& value);

}  // namespace monoflow::models
