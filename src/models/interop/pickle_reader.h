// A pickle machine for what torch.save writes, without Python, so that the files the official
// Glow-TTS writes (utils.save_checkpoint: the model's state_dict, the Adam optimizer's
// state_dict, numpy.float64 learning rates) load as they are.
//
// It runs the program (protocols 2 to 5) and calls no Python code. What it makes of each value:
//   None, bool, int, float, str                      -> the same IValue (an int wider than 64
//                                                      bits: None, as below)
//   tuple, list (and set, frozenset: as lists)       -> Tuple, GenericList
//   dict, collections.OrderedDict                    -> GenericDict in insertion order; the
//                                                      attributes BUILD sets (_metadata) dropped
//   tensor (torch._utils._rebuild_tensor_v2, _rebuild_tensor, _rebuild_parameter,
//           persistent id ('storage', torch.<T>Storage, key, location, numel))
//                                                    -> a CPU tensor over the storage `load` gives
//   numpy scalar / array (numpy_pickle.h)            -> double, int, bool / CPU tensor
//   any other Python object (a class, a function, an instance of another class, bytes)
//                                                    -> None: nothing that needs weights reads it
// A program whose top-level object is such an object (torch.save(model) pickles the whole
// module) is refused, as are opcodes torch.save does not write; both with a UserError naming
// `source`. Tensors are not checked against their storage here (pickle_compat.cpp does that).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Storage.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace monoflow::models {

// A storage named by a persistent id: the record key, its element type and element count.
struct StorageRef {
  std::string key;
  at::ScalarType dtype = at::kFloat;
  int64_t numel = 0;
};
// Returns the storage (its nbytes as the pickle declares it: numel * element size); called
// once per key, the storage then shared by every tensor that names it.
using StorageLoader = std::function<c10::Storage(const StorageRef&)>;

// Runs the program that starts at `program[start]`; sets *end (if given) to the offset after
// its STOP. `load` may be empty for programs without tensors.
c10::IValue unpickle(const std::string& program, size_t start, size_t* end, const StorageLoader& load,
                     const std::string& source);

// The tensors a program holds, whatever objects hold them, each named by its path of attribute
// names, dict keys and list indices ("model.encoder.emb.weight"), with the storage it names.
// For LibTorch archives (our checkpoints, TorchScript files), which pickle modules as objects
// that unpickle() refuses: checked against their records before LibTorch reads them
// (archive_check.h). UserError naming `source` for a malformed program.
struct PickledTensor {
  std::string path;
  at::Tensor tensor;  // over the storage `load` returned, as the program states it (unchecked)
  StorageRef storage;
};
std::vector<PickledTensor> pickled_tensors(const std::string& program, const StorageLoader& load,
                                           const std::string& source);

}  // namespace monoflow::models
