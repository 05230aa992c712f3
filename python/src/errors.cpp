// The one mapping of datavo::Error to the Python exception classes of datavo_sdk/errors.py.
#include <stdexcept>

#include "bindings.hpp"

namespace datavo::python {

Globals& globals() {
  static Globals* g = new Globals();
  return *g;
}

py::object exception_of(const Error& error) {
  auto& g = globals();
  py::object type = g.error_base;
  // The CLI's name for it too: "not_found" (FileNotFoundError) for a dataset, revision or key the origin lacks.
  const char* code = reported_code(error);
  // A server that could not be reached at all is also a ConnectionError to Python; its code stays "remote".
  const char* kind = is_unreachable(error) ? "unreachable" : code;
  if (g.error_types && g.error_types.contains(kind)) type = g.error_types[kind];
  if (!type) throw std::runtime_error(error.message);  // the package was not initialised; never in practice
  py::object exception = type(error.message);
  exception.attr("code") = code;
  exception.attr("sys_errno") = error.sys_errno;
  return exception;
}

void raise(const Error& error) {
  py::object exception = exception_of(error);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  throw py::error_already_set();
}

void bind_errors(py::module_& m) {
  m.def(
      "_init",
      [](py::dict error_types, py::object error_base, py::object sample_type, py::object batch_type) {
        auto& g = globals();
        g.error_types = std::move(error_types);
        g.error_base = std::move(error_base);
        g.sample_type = std::move(sample_type);
        g.batch_type = std::move(batch_type);
      },
      "Registers the exception classes and the Sample and Batch types (datavo_sdk does it at import).");
}

}  // namespace datavo::python
