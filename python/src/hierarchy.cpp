// The hierarchy: datavo::ShardCacheHierarchy, get_or_fetch with a Python fetcher writing into a StagingWriter, and
// cache_info as dicts.
#include "datavo/hierarchy.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/operations.hpp"
#include "datavo/origin_client.hpp"

namespace datavo::python {
namespace {

// What a Python fetcher writes into: the staging file of the shard, as a write-only binary file object. It is
// closed when the fetcher returns; a later write raises ValueError instead of touching a sink that is gone.
class StagingWriter {
 public:
  explicit StagingWriter(ByteSink* sink) : state_(std::make_shared<State>()) { state_->sink = sink; }

  std::size_t write(const py::buffer& data) {
    py::buffer_info info = data.request();  // holds the export (the bytes cannot move) until we are done
    if (!is_contiguous(info)) throw py::value_error("write() needs a contiguous buffer");
    const auto size = static_cast<std::size_t>(info.size * info.itemsize);
    auto state = state_;
    Result<void> written = blocking([&]() -> Result<void> {
      std::lock_guard lock(state->mu);
      if (state->sink == nullptr) return Error{ErrorCode::internal, ""};
      return state->sink->write(info.ptr, size);
    });
    if (!written) {
      if (written.error().message.empty()) closed_error();
      raise(written.error());
    }
    return size;
  }

  // Streams a whole local file into the staging file, for fetchers whose tool writes a file of its own.
  std::size_t write_file(const std::string& path) {
    auto state = state_;
    Result<Bytes> copied = blocking([&]() -> Result<Bytes> {
      std::lock_guard lock(state->mu);
      if (state->sink == nullptr) return Error{ErrorCode::internal, ""};
      return append_file(*state->sink, path);
    });
    if (!copied) {
      if (copied.error().message.empty()) closed_error();
      raise(copied.error());
    }
    return std::size_t(copied->count());
  }

  void restart() {
    auto state = state_;
    Result<void> done = blocking([&]() -> Result<void> {
      std::lock_guard lock(state->mu);
      if (state->sink == nullptr) return Error{ErrorCode::internal, ""};
      return state->sink->restart();
    });
    if (!done) {
      if (done.error().message.empty()) closed_error();
      raise(done.error());
    }
  }

  std::uint64_t tell() {
    std::lock_guard lock(state_->mu);
    if (state_->sink == nullptr) closed_error();
    return state_->sink->written().count();
  }

  bool closed() {
    std::lock_guard lock(state_->mu);
    return state_->sink == nullptr;
  }

  void close() {
    std::lock_guard lock(state_->mu);
    state_->sink = nullptr;
  }

 private:
  struct State {
    std::mutex mu;  // ByteSink::write() is for one thread at a time; a fetcher may use threads
    ByteSink* sink = nullptr;
  };

  static bool is_contiguous(const py::buffer_info& info) {
    py::ssize_t expected = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
      if (info.strides[std::size_t(d)] != expected) return false;
      expected *= info.shape[std::size_t(d)];
    }
    return true;
  }

  [[noreturn]] static void closed_error() {
    throw py::value_error("I/O operation on a closed staging file: the fetcher has returned");
  }

  std::shared_ptr<State> state_;
};

// State shared by the C++ Fetcher and the call that made it. Touched only with the GIL held.
struct FetchCall {
  py::object fetcher;
  std::optional<py::error_already_set> raised;
};

Expectation expectation_from(const py::handle& answer) {
  Expectation out;
  // Only a dict means something: `lambda f: f.write(data)` returns a count, which is not a claim about the shard.
  if (!py::isinstance<py::dict>(answer)) return out;
  auto dict = py::reinterpret_borrow<py::dict>(answer);
  for (auto [key, value] : dict) {
    const auto name = py::str(key).cast<std::string>();
    const auto got = [&value] {
      return py::str(py::type::of(value).attr("__name__")).cast<std::string>() + " " +
             py::repr(value).cast<std::string>();
    };
    if (name == "size") {
      // An int only: a bool is an int to Python, and a float or a str would be cast (or fail) without a word.
      if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
        throw py::type_error("a fetcher's answer: 'size' must be an int (the shard's bytes), not " + got());
      }
      if (value.cast<py::int_>() < py::int_(0)) {
        throw py::value_error("a fetcher's answer: 'size' must be 0 or more, not " + got());
      }
      out.size = Bytes{value.cast<std::uint64_t>()};
    } else if (name == "sha256") {
      if (!py::isinstance<py::str>(value)) {
        throw py::type_error("a fetcher's answer: 'sha256' must be a str of 64 hex digits, not " + got());
      }
      auto digest = Sha256::parse(value.cast<std::string>());
      if (!digest) throw py::value_error("a fetcher's answer: 'sha256': " + digest.error().message);
      out.sha256 = *digest;
    } else {
      throw py::value_error("a fetcher's answer takes 'size' and 'sha256', not " + py::repr(key).cast<std::string>());
    }
  }
  return out;
}

// The C++ Fetcher around a Python callable. An exception raised by it is kept (with its traceback) and re-raised
// by get_or_fetch once the hierarchy has given up the call; the hierarchy installs nothing.
Fetcher python_fetcher(const std::shared_ptr<FetchCall>& call) {
  // No C++ exception may cross the hierarchy (it is exception-free by contract): whatever goes wrong here becomes a
  // Python exception kept in `call`, and an Error for the hierarchy.
  return [call](ByteSink& sink) -> Result<Expectation> {
    py::gil_scoped_acquire gil;
    StagingWriter writer(&sink);
    try {
      py::object handle = py::cast(writer);
      py::object answer = call->fetcher(handle);
      writer.close();
      return expectation_from(answer);
    } catch (py::error_already_set& e) {
      writer.close();
      call->raised = std::move(e);
    } catch (py::builtin_exception& e) {  // a bad answer (py::value_error, py::cast_error, ...)
      writer.close();
      e.set_error();
      call->raised = py::error_already_set();
    } catch (std::exception& e) {
      writer.close();
      PyErr_SetString(PyExc_RuntimeError, e.what());
      call->raised = py::error_already_set();
    }
    return Error{ErrorCode::internal,
                 "the fetcher raised " + py::str(call->raised->type().attr("__name__")).cast<std::string>()};
  };
}

py::list cache_info_dicts(ShardCacheHierarchy& hierarchy) {
  std::vector<TierInfo> infos = blocking([&] { return hierarchy.cache_info(); });
  py::list out;
  for (const auto& info : infos) out.append(tier_info_dict(info));
  return out;
}

std::string get_or_fetch(ShardCacheHierarchy& hierarchy, const py::str& content_hash, py::object fetcher,
                         const std::optional<std::string>& instance) {
  if (!PyCallable_Check(fetcher.ptr())) throw py::type_error("fetcher must be callable");
  ShardKey key{resolve_instance(instance), parse_hash(content_hash)};
  auto call = std::make_shared<FetchCall>();
  call->fetcher = std::move(fetcher);
  Fetcher native = python_fetcher(call);
  Result<FetchResult> result = blocking([&] { return hierarchy.get_or_fetch(key, native); });
  if (call->raised) {
    py::error_already_set raised = std::move(*call->raised);
    call->raised.reset();
    raised.restore();
    throw py::error_already_set();
  }
  if (!result) raise(result.error());
  return result->handle.path();
}

}  // namespace

ContentHash parse_hash(const py::str& text) {
  auto hash = ContentHash::parse(text.cast<std::string>());
  if (hash) return *hash;
  // Name the offending character (a Python character, not a UTF-8 byte), so that a stray uppercase letter or a
  // pasted quote is obvious.
  std::string message = "invalid content_hash " + py::repr(text).cast<std::string>() + ": ";
  std::size_t index = 0;
  for (py::handle item : text) {
    const auto c = item.cast<std::string>();
    if (c.size() != 1 || !((c[0] >= '0' && c[0] <= '9') || (c[0] >= 'a' && c[0] <= 'f'))) {
      message += "character " + py::repr(item).cast<std::string>() + " at offset " + std::to_string(index) +
                 " is not a lowercase hex digit; ";
      break;
    }
    ++index;
  }
  raise(Error{ErrorCode::invalid_argument, message + hash.error().message});
}

Instance resolve_instance(const std::optional<std::string>& name) {
  if (name) return unwrap(Instance::parse(*name));
  // The CLI's resolver: the server's instance_id for $DATAVO_SERVER, not the URL's host_port. It may ask the server.
  auto instance = [] {
    py::gil_scoped_release release;
    return OriginClient::server_instance(nullptr);
  }();
  return unwrap(std::move(instance));
}

py::dict tier_info_dict(const TierInfo& info) {
  py::dict stats;
  info.stats.for_each([&](const char* name, std::uint64_t value) { stats[name] = value; });
  py::dict row;
  row["name"] = info.name;
  row["type"] = info.type;
  row["location"] = info.location;
  row["max_bytes"] = optional_bytes(info.max_bytes);
  row["read_only"] = info.read_only;
  row["used_bytes"] = info.usage ? py::object(py::int_(info.usage->used.count())) : py::none();
  row["entries"] = info.usage ? py::object(py::int_(info.usage->entries)) : py::none();
  row["stats"] = stats;
  row["scope"] = to_string(info.scope);
  row["kept_in"] = info.kept_in.empty() ? py::object(py::none()) : py::object(py::str(info.kept_in));
  py::list not_kept;
  info.stats.for_each_stat([&](TierStat stat, const char* name, std::uint64_t) {
    if (!info.kept.contains(stat)) not_kept.append(name);
  });
  row["not_kept"] = not_kept;
  row["breaker_open"] = info.breaker_open;
  return row;
}

void bind_hierarchy(py::module_& m) {
  py::class_<ShardCacheHierarchy, std::shared_ptr<ShardCacheHierarchy>>(m, "Hierarchy")
      .def_property_readonly("tiers", [](const ShardCacheHierarchy& h) { return h.tiers(); })
      .def("get_or_fetch", &get_or_fetch, py::arg("content_hash"), py::arg("fetcher"), py::arg("instance") = py::none())
      .def("cache_info", &cache_info_dicts)
      .def("flush_stats", [](ShardCacheHierarchy& h) { blocking([&] { h.flush_stats(); }); });

  m.def(
      "make_hierarchy",
      [](std::vector<std::shared_ptr<Tier>> tiers) {
        return unwrap(blocking([&] { return ShardCacheHierarchy::create(std::move(tiers)); }));
      },
      py::arg("tiers"));
  m.def(
      "get_default_shard_cache",
      [](std::optional<std::string> config_path) {
        return unwrap(blocking([&] { return get_default_shard_cache(config_path); }));
      },
      py::arg("cache_config_path") = py::none());

  py::class_<StagingWriter>(m, "StagingWriter",
                            "The staging file a fetcher writes the shard into: a write-only binary file object.")
      .def("write", &StagingWriter::write, py::arg("data"), "Appends bytes; returns how many.")
      .def("write_file", &StagingWriter::write_file, py::arg("path"),
           "Appends the whole content of a local file (for tools that download to a path).")
      .def("restart", &StagingWriter::restart, "Discards everything written so far (to retry from the first byte).")
      .def("tell", &StagingWriter::tell)
      .def("flush", [](StagingWriter&) {})
      .def("writable", [](StagingWriter&) { return true; })
      .def("readable", [](StagingWriter&) { return false; })
      .def("seekable", [](StagingWriter&) { return false; })
      .def_property_readonly("closed", &StagingWriter::closed)
      .def_property_readonly("mode", [](StagingWriter&) { return "wb"; });
}

}  // namespace datavo::python
