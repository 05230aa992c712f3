// What the translation units of datavo_sdk._datavo share: the objects registered by the Python package, the one
// mapping of datavo::Error to a Python exception, the GIL released around blocking calls with their log lines
// forwarded, and one bind_* function per part of the module (module.cpp calls them).
//
// No cache logic lives in the extension: every decision (walk, promote, install, shard order, sharding,
// verification, dataset resolution, the reader thread) is the C++ library's. What it does is translation:
//   - errors: a datavo::Error becomes the Python exception class registered for its ErrorCode
//     (datavo_sdk/errors.py);
//   - the GIL: released around every call that may block (config resolution, hierarchy walks, fetches, prefetch
//     waits, stream set-up and teardown), re-acquired only to call back into Python (a fetcher);
//   - samples: a C++ SampleView becomes a datavo_sdk.Sample (a dict subclass) whose fields are memoryviews sliced
//     from one read-only buffer per mapped shard. The buffer object owns the shard's mapping (a shared_ptr), so a
//     view can never outlive the memory it points into: after Sample.release() a view raises ValueError, never
//     crashes;
//   - logging: C++ log lines are queued (the sink never touches the GIL, so it cannot deadlock a thread that holds a
//     datavo lock) and handed to Python's `logging` by the calling thread when a call returns (drain_logs()).
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo::python {

namespace py = pybind11;

// Objects that live as long as the interpreter. Deliberately leaked: destroying a py::object after Py_Finalize
// would crash at exit.
struct Globals {
  py::dict error_types;  // ErrorCode name -> exception class, set by datavo_sdk.errors
  py::object error_base;
  py::object sample_type;  // datavo_sdk._sample.Sample, a dict subclass
  py::object batch_type;   // datavo_sdk._sample.Batch, a dict subclass
  py::object logger;       // logging.getLogger("datavo"), set with the forwarding switch
  py::str key_field{"__key__"};
  py::tuple empty_tuple{0};
};
Globals& globals();

// The Python exception object of `error`: the class registered for its ErrorCode (datavo_sdk/errors.py), with
// `code` and `sys_errno` set. REQUIRES: the GIL.
py::object exception_of(const Error& error);

// Raises the Python exception of `error`. REQUIRES: the GIL.
[[noreturn]] void raise(const Error& error);

template <typename T>
T unwrap(Result<T>&& result) {
  if (!result) raise(result.error());
  return std::move(*result);
}

// A byte count as an int, or None.
inline py::object optional_bytes(const std::optional<Bytes>& bytes) {
  if (!bytes) return py::none();
  return py::int_(bytes->count());
}

// A content hash from Python text; a bad one raises ValueError naming the offending character and its offset.
ContentHash parse_hash(const py::str& text);

// The instance `name` names; nullopt: the one remembered for $DATAVO_SERVER, else "local" (as the CLI resolves it).
Instance resolve_instance(const std::optional<std::string>& name);

// One tier's description and counters (ShardCacheHierarchy.cache_info()'s rows, and cache_stats()'s).
py::dict tier_info_dict(const TierInfo& info);

// What a stream (StreamArgs) and a warm (WarmArgs) are asked for alike: the dataset, its key group and revision, the
// cache and the origin. Set field by field from Python (datavo_sdk/_stream.py, _ops.py).
struct DatasetArgs {
  std::string dataset;
  std::vector<std::string> keys;
  std::optional<std::uint64_t> revision;
  std::shared_ptr<ShardCacheHierarchy> cache;
  std::optional<std::string> cache_config_path;
  std::optional<std::string> server;
  std::optional<std::string> token;
  std::optional<std::string> instance;

  // The origin client's options: server, token and instance; the rest from the environment.
  OriginClientOptions origin() const {
    OriginClientOptions options;
    if (server) options.server = *server;
    options.token = token;
    options.instance = instance;
    return options;
  }
};

// Binds DatasetArgs' fields on the class of `Args` (a DatasetArgs).
template <typename Args>
void bind_dataset_args(py::class_<Args>& c) {
  c.def_readwrite("dataset", &Args::dataset)
      .def_readwrite("keys", &Args::keys)
      .def_readwrite("revision", &Args::revision)
      .def_readwrite("cache", &Args::cache)
      .def_readwrite("cache_config_path", &Args::cache_config_path)
      .def_readwrite("server", &Args::server)
      .def_readwrite("token", &Args::token)
      .def_readwrite("instance", &Args::instance);
}

// Hands the queued log lines to logging.getLogger("datavo"). REQUIRES: the GIL. Never raises (a failing handler is
// logging's business: it reports it on stderr itself).
void drain_logs();

// Runs `f` without the GIL, then forwards what it logged.
template <typename F>
auto blocking(F&& f) {
  struct Drain {
    ~Drain() {
      try {
        drain_logs();
      } catch (...) {
        PyErr_Clear();  // a log line is never worth an exception out of a destructor
      }
    }
  } drain;
  py::gil_scoped_release release;
  return f();
}

void bind_errors(py::module_& m);     // errors.cpp: _init
void bind_logging(py::module_& m);    // logging.cpp: the forwarding switch and the level
void bind_tiers(py::module_& m);      // tiers.cpp: Tier, make_tier, tier_stat_names
void bind_hierarchy(py::module_& m);  // hierarchy.cpp: Hierarchy, get_or_fetch's StagingWriter, the constructors
void bind_stream(py::module_& m);     // stream.cpp: StreamArgs, NativeStream, ShardBuffer, _stop_pipelines
void bind_ops(py::module_& m);        // ops.cpp: WarmArgs, WarmJob, cache_ls, cache_rm, cache_gc, ...

}  // namespace datavo::python
