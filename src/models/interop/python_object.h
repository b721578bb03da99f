// What the pickle reader (pickle_reader.h) holds for a Python value that has no IValue
// counterpart while it runs: a global (class or function), bytes, or an instance made by a
// call or by NEWOBJ, with the state BUILD gave it. It travels inside an IValue capsule, so
// that lists, dicts and the memo can hold it like any other value.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace monoflow::models {

struct PythonObject : torch::CustomClassHolder {
  enum class Kind { kGlobal, kBytes, kInstance };
  Kind kind = Kind::kInstance;
  std::string type;       // "module.name": the global itself, or the callable/class that made the instance
  std::string bytes;      // kBytes: the contents
  c10::IValue args;       // kInstance: the arguments it was made from
  c10::IValue state;      // kInstance: BUILD's argument (None until then)
  c10::IValue converted;  // what BUILD turned it into (a numpy array becomes a tensor); None if nothing
};

// The object inside `v`, or null when `v` is an ordinary IValue.
inline const PythonObject* python_object(const c10::IValue& v) {
  if (!v.isCapsule()) return nullptr;
  return dynamic_cast<const PythonObject*>(v.toCapsule().get());
}

}  // namespace monoflow::models
