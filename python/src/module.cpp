// datavo_sdk._datavo: the pybind11 bindings of the Python SDK over Datavo's public C++ API (include/datavo/). What
// the module does and does not do is at the top of bindings.hpp; each part of it is bound by its own file.
#include "bindings.hpp"

PYBIND11_MODULE(_datavo, m) {
  using namespace datavo::python;
  m.doc() = "Bindings of Datavo's C++ API; use the datavo_sdk package, not this module.";
  m.attr("__version__") = DATAVO_VERSION;
  bind_errors(m);
  bind_logging(m);
  bind_tiers(m);
  bind_hierarchy(m);
  bind_stream(m);
  bind_ops(m);
}
