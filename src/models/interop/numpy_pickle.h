// numpy values as pickle writes them, turned into IValues: a scalar (numpy.float64 and
// friends: numpy.core.multiarray.scalar(dtype, raw bytes)) and an array
// (numpy.core.multiarray._reconstruct(ndarray, ...), then BUILD with its shape, dtype and
// raw bytes). The official Glow-TTS saves its learning rate as a numpy.float64.
// Only plain numeric dtypes are understood (bool, int8-64, uint8-64, float16/32/64).
#pragma once

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>

#include "models/interop/python_object.h"

namespace monoflow::models {

// numpy's scalar constructor (numpy.core.multiarray.scalar, numpy._core.multiarray.scalar).
bool is_numpy_scalar_constructor(const std::string& global);
// numpy's array constructor (numpy[._]core.multiarray._reconstruct).
bool is_numpy_array_constructor(const std::string& global);

// A scalar from its dtype object (numpy.dtype(...) after BUILD) and raw bytes: a double, an
// int or a bool; nullopt for a dtype outside the list above or bytes of the wrong length.
std::optional<c10::IValue> numpy_scalar(const c10::IValue& dtype, const PythonObject& bytes);

// An array from ndarray.__setstate__'s argument (version, shape, dtype, fortran order, raw
// bytes) as a CPU tensor of the same dtype and shape; nullopt when not understood.
std::optional<c10::IValue> numpy_array(const c10::IValue& state);

}  // namespace monoflow::models
