// monoflow.convert_weights (src/train/convert_weights.h, as tools/convert_weights) and
// monoflow.load_weights: the tensors of a monoflow checkpoint or an official Glow-TTS file.
#include <optional>

#include "bindings.h"
#include "common/error.h"
#include "models/interop/weights.h"
#include "train/checkpoint.h"
#include "train/convert_weights.h"

namespace monoflow::python {
namespace {

using train::ConvertReport;

// Name -> tensor in the file's order (a Python dict keeps it).
py::dict as_dict(const std::vector<std::pair<std::string, torch::Tensor>>& weights) {
  py::dict d;
  for (const auto& [key, tensor] : weights) d[py::str(key)] = tensor;
  return d;
}

}  // namespace

void bind_convert(py::module_& m) {
  py::class_<ConvertReport>(m, "ConvertReport", "What monoflow.convert_weights read and wrote.")
      .def_readonly("summary", &ConvertReport::summary, "the model's hyper-parameters, as convert_weights prints them")
      .def_readonly("tensors", &ConvertReport::tensors)
      .def_readonly("parameters", &ConvertReport::parameters)
      .def_readonly("keys", &ConvertReport::keys, "(key, shape) of every tensor of the model, in its order")
      .def_readonly("wrote", &ConvertReport::wrote, "'wrote OUT (...)', '' when nothing was written")
      .def_readonly("step", &ConvertReport::step, "to_official: the monoflow checkpoint's step (else -1)")
      .def_readonly("iteration", &ConvertReport::iteration,
                    "to_official with checkpoint: the 'iteration' written, the epochs completed (else -1)")
      .def("__repr__", [](const ConvertReport& r) { return "ConvertReport('" + r.summary + "')"; });

  m.def(
      "convert_weights",
      [](const std::string& in, std::optional<std::string> out, bool to_official, bool checkpoint,
         int64_t dilation_rate) {
        train::ConvertOptions o{in, out.value_or(""), to_official, checkpoint, dilation_rate};
        py::gil_scoped_release release;
        return train::convert_weights(o);
      },
      py::arg("src"), py::arg("dst") = py::none(), py::kw_only(), py::arg("to_official") = false,
      py::arg("checkpoint") = false, py::arg("dilation_rate") = 1);

  m.def(
      "load_weights",
      [](const std::string& path) {
        std::vector<std::pair<std::string, torch::Tensor>> weights;
        {
          py::gil_scoped_release release;
          weights = train::checkpoint_format(path) == train::CheckpointFormat::kMonoflow
                        ? train::read_checkpoint_weights(path)
                        : models::read_state_dict(path);
        }
        return as_dict(weights);
      },
      py::arg("path"));
}

}  // namespace monoflow::python
