// The project's exceptions as Python exceptions with the same messages:
//   monoflow::UserError   -> monoflow.UserError (a RuntimeError)
//   monoflow::FileError   -> monoflow.FileError (a UserError; .file, .line)
//   monoflow::OptionError -> monoflow.OptionError (a UserError; .key, .problem)
//   c10::Error            -> RuntimeError without the C++ backtrace, as the tools print it
//                            (c10::IndexError, ValueError, TypeError: those, as torch maps them)
// Other std::exceptions keep pybind11's mapping (RuntimeError, ValueError, ...).
#include <c10/util/Exception.h>

#include "bindings.h"
#include "common/error.h"

namespace monoflow::python {
namespace {

// The exception types, created once when the module is imported and kept for its lifetime.
PyObject* g_user_error = nullptr;
PyObject* g_file_error = nullptr;
PyObject* g_option_error = nullptr;

// Raises `type(message)` with the attributes set on the instance.
void raise(PyObject* type, const char* message, const py::dict& attributes) {
  py::object error = py::reinterpret_borrow<py::object>(type)(message);
  for (const auto& [name, value] : attributes) error.attr(name) = value;
  PyErr_SetObject(type, error.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
  g_user_error = PyErr_NewExceptionWithDoc(
      "monoflow.UserError", "A problem the user can fix (config, data, paths, options); the message says what.",
      PyExc_RuntimeError, nullptr);
  g_file_error = PyErr_NewExceptionWithDoc("monoflow.FileError",
                                           "A problem at a place in a file: '<file>:<line>: <what>' (.file, .line).",
                                           g_user_error, nullptr);
  g_option_error = PyErr_NewExceptionWithDoc("monoflow.OptionError",
                                             "A bad value of one config key: '<key>: <problem>' (.key, .problem).",
                                             g_user_error, nullptr);
  m.add_object("UserError", py::handle(g_user_error));
  m.add_object("FileError", py::handle(g_file_error));
  m.add_object("OptionError", py::handle(g_option_error));
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FileError& e) {
      raise(g_file_error, e.what(), py::dict(py::arg("file") = e.file(), py::arg("line") = e.line()));
    } catch (const OptionError& e) {
      raise(g_option_error, e.what(), py::dict(py::arg("key") = e.key(), py::arg("problem") = e.problem()));
    } catch (const UserError& e) {
      raise(g_user_error, e.what(), py::dict());
    } catch (const c10::IndexError& e) {  // TORCH_CHECK_INDEX and its kin: the type torch gives them
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}

}  // namespace monoflow::python
