// monoflow.train: a training run in this process, with the train tool's contracts
// (src/train/train_command.h): the run directory's lock, resume, and SIGINT/SIGTERM stopping
// the run after a checkpoint. The trainer's signal handlers replace Python's for the run (a
// Ctrl-C then asks the trainer to stop, a second one ends the process at once, as in the tool)
// and Python's come back afterwards. A run stopped by SIGINT raises KeyboardInterrupt once its
// checkpoint is written (Python's meaning of Ctrl-C); one stopped by SIGTERM returns its
// TrainSummary with interrupted=True and signal=15.
#include <signal.h>

#include <optional>
#include <variant>

#include "bindings.h"
#include "train/signals.h"
#include "train/train_command.h"

namespace monoflow::python {
namespace {

using train::RunSummary;
using train::TrainCommand;

// Python's SIGINT and SIGTERM handlers, put back when the run ends however it ends.
class SavedSignalHandlers {
 public:
  SavedSignalHandlers() {
    sigaction(SIGINT, nullptr, &interrupt_);
    sigaction(SIGTERM, nullptr, &terminate_);
  }
  ~SavedSignalHandlers() {
    sigaction(SIGINT, &interrupt_, nullptr);
    sigaction(SIGTERM, &terminate_, nullptr);
  }

 private:
  struct sigaction interrupt_ {};
  struct sigaction terminate_ {};
};

RunSummary run(const TrainCommand& command) {
  py::gil_scoped_release release;
  SavedSignalHandlers saved;
  train::clear_stop_request();    // a request left by an earlier run in this process
  train::install_stop_handlers(); // now, so that a Ctrl-C while the data is read stops the run too
  RunSummary summary = train::run_train_command(command);
  train::clear_stop_request();
  return summary;
}

}  // namespace

void bind_train(py::module_& m) {
  py::class_<RunSummary>(m, "TrainSummary", "How a monoflow.train run ended.")
      .def_readonly("step", &RunSummary::step, "optimizer updates done in total")
      .def_readonly("epoch", &RunSummary::epoch)
      .def_readonly("skipped", &RunSummary::skipped, "non-finite steps skipped in total")
      .def_readonly("checkpoint", &RunSummary::checkpoint, "the last checkpoint written ('' if none)")
      .def_readonly("interrupted", &RunSummary::interrupted, "stopped by SIGTERM (SIGINT raises KeyboardInterrupt)")
      .def_readonly("signal", &RunSummary::signal, "the signal that stopped it (0: none)")
      .def_readonly("stop_reason", &RunSummary::stop_reason, "'max_steps', 'epochs', 'time limit' or 'signal'")
      .def("__repr__", [](const RunSummary& s) {
        return "TrainSummary(step=" + std::to_string(s.step) + ", stop_reason='" + s.stop_reason + "', checkpoint='" +
               s.checkpoint + "')";
      });

  m.def(
      "train",
      [](const std::string& config, std::vector<std::string> overrides, std::optional<std::string> run_dir,
         std::variant<bool, std::string> resume, bool force_new, std::optional<std::string> init_from,
         std::optional<int64_t> max_steps, double max_minutes, std::optional<std::string> align_backend,
         bool compare_align, bool quiet) {
        TrainCommand c;
        c.config_path = config;
        c.overrides = std::move(overrides);
        c.run_dir = run_dir.value_or("");
        if (auto* path = std::get_if<std::string>(&resume)) {
          c.resume = *path;
        } else if (std::get<bool>(resume)) {
          c.resume = "latest";
        }
        c.force_new = force_new;
        c.init_from = init_from.value_or("");
        c.max_steps = max_steps.value_or(-1);
        c.max_minutes = max_minutes;
        c.align_backend = align_backend.value_or("");
        c.compare_align = compare_align;
        c.quiet = quiet;
        const RunSummary summary = run(c);
        if (summary.interrupted && summary.signal == SIGINT) {
          const std::string message =
              "training stopped by SIGINT at step " + std::to_string(summary.step) + "; last checkpoint " +
              (summary.checkpoint.empty() ? "(none)" : summary.checkpoint) +
              "; monoflow.train(..., resume=True) continues";
          PyErr_SetString(PyExc_KeyboardInterrupt, message.c_str());
          throw py::error_already_set();
        }
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // one Python's handler took meanwhile
        return summary;
      },
      py::arg("config"), py::arg("overrides") = std::vector<std::string>{}, py::kw_only(),
      py::arg("run_dir") = py::none(), py::arg("resume") = false, py::arg("force_new") = false,
      py::arg("init_from") = py::none(), py::arg("max_steps") = py::none(), py::arg("max_minutes") = 0.0,
      py::arg("align_backend") = py::none(), py::arg("compare_align") = false, py::arg("quiet") = false);
}

}  // namespace monoflow::python
