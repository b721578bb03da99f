// The parts of the Python module monoflow._monoflow (module.cpp calls each once), one file each.
#pragma once

#include <pybind11/stl.h>
#include <torch/extension.h>

namespace monoflow::python {

namespace py = pybind11;

void bind_errors(py::module_& m);     // errors.cpp: UserError, FileError, OptionError; c10::Error
void bind_synthesis(py::module_& m);  // synthesis.cpp: Synthesizer, SynthesisResult
void bind_align(py::module_& m);      // align.cpp: align()
void bind_train(py::module_& m);      // train.cpp: train(), TrainSummary
void bind_convert(py::module_& m);    // convert.cpp: convert_weights(), load_weights()

}  // namespace monoflow::python
