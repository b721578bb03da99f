// monoflow._monoflow: the library behind `import monoflow` (python/monoflow/__init__.py).
// Tensors cross as torch.Tensor through torch's own pybind11 casters (libtorch_python):
// the at::Tensor is wrapped, its storage not copied.
#include "bindings.h"

PYBIND11_MODULE(_monoflow, m) {
  m.doc() = "monoflow's C++ library (Glow-TTS synthesis, alignment, training, weight conversion).";
  monoflow::python::bind_errors(m);
  monoflow::python::bind_synthesis(m);
  monoflow::python::bind_align(m);
  monoflow::python::bind_train(m);
  monoflow::python::bind_convert(m);
}
