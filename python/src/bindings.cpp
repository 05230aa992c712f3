// datavo_sdk._datavo: the pybind11 bindings of the Python SDK over Datavo's public C++ API (include/datavo/).
//
// No cache logic lives here: every decision (walk, promote, install, shard order, sharding, verification) is the C++
// library's. What this file does is translation:
//   - errors: a datavo::Error becomes the Python exception class registered for its ErrorCode (datavo_sdk/_errors.py);
//   - the GIL: released around every call that may block (config resolution, hierarchy walks, fetches, prefetch
//     waits, stream set-up and teardown), re-acquired only to call back into Python (a fetcher);
//   - samples: a C++ SampleView becomes a datavo_sdk.Sample (a dict subclass) whose fields are memoryviews sliced from
//     one read-only buffer per mapped shard. The buffer object owns the shard's mapping (a shared_ptr), so a view
//     can never outlive the memory it points into: after Sample.release() a view raises ValueError, never crashes;
//   - logging: C++ log lines are queued (the sink never touches the GIL, so it cannot deadlock a thread that holds a
//     datavo lock) and handed to Python's `logging` by the calling thread when a call returns (drain_logs()).
#include <Python.h>
#include <fcntl.h>
#include <pthread.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "datavo/config.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/log.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"
#include "datavo/sample_stream.hpp"
#include "datavo/tier.hpp"
#include "datavo/tier_registry.hpp"

namespace py = pybind11;

namespace datavo::python {
namespace {

// Objects that live as long as the interpreter. Deliberately leaked: destroying a py::object after Py_Finalize
// would crash at exit.
struct Globals {
  py::dict error_types;  // ErrorCode name -> exception class, set by datavo_sdk._errors
  py::object error_base;
  py::object sample_type;  // datavo_sdk._sample.Sample, a dict subclass
  py::object logger;       // logging.getLogger("datavo"), set with the forwarding switch
  py::str key_field{"__key__"};
  py::tuple empty_tuple{0};
};
Globals& globals() {
  static Globals* g = new Globals();
  return *g;
}

// ---- errors ---------------------------------------------------------------------------------------------------

[[noreturn]] void raise(const Error& error) {
  auto& g = globals();
  py::object type = g.error_base;
  const char* code = to_string(error.code);
  // A bad argument that names something absent (a dataset or revision the origin does not have) is a
  // FileNotFoundError to Python, whatever its code.
  if (error.code == ErrorCode::invalid_argument && error.sys_errno == ENOENT) code = "not_found";
  if (g.error_types && g.error_types.contains(code)) type = g.error_types[code];
  if (!type) throw std::runtime_error(error.message);  // the package was not initialised; never in practice
  py::object exception = type(error.message);
  exception.attr("code") = code;
  exception.attr("sys_errno") = error.sys_errno;
  PyErr_SetObject(type.ptr(), exception.ptr());
  throw py::error_already_set();
}

template <typename T>
T unwrap(Result<T>&& result) {
  if (!result) raise(result.error());
  return std::move(*result);
}

// ---- logging --------------------------------------------------------------------------------------------------

// Lines logged by any thread, waiting for a Python thread to hand them to `logging`. Bounded: a process that never
// returns to Python (a long C++ call) cannot grow it without limit; what is dropped is counted and reported.
struct LogQueue {
  static constexpr std::size_t k_max_lines = 10'000;
  std::mutex mu;
  std::deque<std::pair<LogLevel, std::string>> lines;
  std::size_t dropped = 0;
};
LogQueue& log_queue() {
  static LogQueue* q = new LogQueue();
  return *q;
}

void queue_line(LogLevel level, std::string_view message) {
  auto& q = log_queue();
  std::lock_guard lock(q.mu);
  if (q.lines.size() >= LogQueue::k_max_lines) {
    q.lines.pop_front();
    ++q.dropped;
  }
  q.lines.emplace_back(level, std::string(message));
}

int python_level(LogLevel level) {
  switch (level) {
    case LogLevel::error: return 40;
    case LogLevel::warning: return 30;
    case LogLevel::info: return 20;
    case LogLevel::debug: return 10;
  }
  return 30;
}

// Hands the queued lines to logging.getLogger("datavo"). REQUIRES: the GIL. Never raises (a failing handler is
// logging's business: it reports it on stderr itself).
void drain_logs() {
  auto& g = globals();
  if (!g.logger) return;
  std::deque<std::pair<LogLevel, std::string>> lines;
  std::size_t dropped = 0;
  {
    auto& q = log_queue();
    std::lock_guard lock(q.mu);
    lines.swap(q.lines);
    std::swap(dropped, q.dropped);
  }
  if (lines.empty() && dropped == 0) return;
  py::object log = g.logger.attr("log");
  try {
    if (dropped > 0) log(30, std::to_string(dropped) + " earlier log lines were dropped (the queue was full)");
    for (auto& [level, message] : lines) log(python_level(level), py::str(message));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("datavo_sdk: forwarding a log line");
  }
}

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

// ---- tiers ----------------------------------------------------------------------------------------------------

py::object optional_bytes(const std::optional<Bytes>& bytes) {
  if (!bytes) return py::none();
  return py::int_(bytes->count());
}

std::shared_ptr<Tier> make_tier_from_arguments(const std::string& type, const std::vector<TierArgument>& arguments,
                                               const std::string& origin) {
  auto config = parse_tier_arguments(type, arguments, origin);
  if (!config) raise(config.error());
  return unwrap(make_tier(*config));
}

// ---- content hashes -------------------------------------------------------------------------------------------

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

// ---- fetchers -------------------------------------------------------------------------------------------------

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
    Result<std::size_t> copied = blocking([&]() -> Result<std::size_t> {
      std::lock_guard lock(state->mu);
      if (state->sink == nullptr) return Error{ErrorCode::internal, ""};
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return Error::from_errno(errno, "fetcher: open " + path);
      std::vector<char> buffer(1 << 20);
      std::size_t total = 0;
      for (;;) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          Error error = Error::from_errno(errno, "fetcher: read " + path);
          ::close(fd);
          return error;
        }
        if (n == 0) break;
        auto written = state->sink->write(buffer.data(), std::size_t(n));
        if (!written) {
          ::close(fd);
          return std::move(written).error();
        }
        total += std::size_t(n);
      }
      ::close(fd);
      return total;
    });
    if (!copied) {
      if (copied.error().message.empty()) closed_error();
      raise(copied.error());
    }
    return *copied;
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
    if (name == "size") {
      out.size = Bytes{value.cast<std::uint64_t>()};
    } else if (name == "sha256") {
      auto digest = Sha256::parse(value.cast<std::string>());
      if (!digest) raise(digest.error());
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

// ---- cache info -----------------------------------------------------------------------------------------------

py::dict stats_dict(const TierStats& stats) {
  py::dict out;
  stats.for_each([&](const char* name, std::uint64_t value) { out[name] = value; });
  return out;
}

py::list tier_stat_names() {
  py::list out;
  TierStats{}.for_each([&](const char* name, std::uint64_t) { out.append(name); });
  return out;
}

py::list cache_info(ShardCacheHierarchy& hierarchy) {
  std::vector<TierInfo> infos = blocking([&] { return hierarchy.cache_info(); });
  py::list out;
  for (const auto& info : infos) {
    py::dict row;
    row["name"] = info.name;
    row["type"] = info.type;
    row["location"] = info.location;
    row["max_bytes"] = optional_bytes(info.max_bytes);
    row["read_only"] = info.read_only;
    row["used_bytes"] = info.usage ? py::object(py::int_(info.usage->used.count())) : py::none();
    row["entries"] = info.usage ? py::object(py::int_(info.usage->entries)) : py::none();
    row["stats"] = stats_dict(info.stats);
    out.append(row);
  }
  return out;
}

// ---- hierarchy ------------------------------------------------------------------------------------------------

Instance resolve_instance(const std::optional<std::string>& name) {
  if (name) return unwrap(Instance::parse(*name));
  return unwrap(instance_from_environment(nullptr));
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

// ---- samples --------------------------------------------------------------------------------------------------

// The read-only buffer of one mapped shard. Field memoryviews are slices of one memoryview over it, so they all
// keep it (and through it the mapping) alive.
struct ShardBuffer {
  std::shared_ptr<const ShardMapping> mapping;
};

struct StreamArgs {
  std::string dataset;
  std::vector<std::string> keys;
  std::optional<std::uint64_t> revision;
  std::shared_ptr<ShardCacheHierarchy> cache;
  std::optional<std::string> cache_config_path;
  std::optional<std::string> server;
  std::optional<std::string> token;
  std::optional<std::string> instance;
  std::size_t rank = 0, world_size = 1, worker = 0, num_workers = 1;
  bool shuffle = false;
  std::uint64_t seed = 0, epoch = 0;
  std::size_t prefetch = 2;
  bool copy = false;
};

// ---- the sample pipeline --------------------------------------------------------------------------------------

// Samples are pulled from C++ in batches by a producer thread, then turned into Python objects one at a time as
// Python asks for them.
constexpr std::size_t k_batch = 64;

// One batch the producer filled, and how the stream stood after its last sample.
struct SampleBatch {
  std::vector<SampleView> samples;
  std::optional<Error> error;  // the stream failed after `samples` (its sticky error: nothing follows)
  bool end = false;            // the stream ended, or the pipeline was stopped, after `samples`
};

class SamplePipeline;

// How many forks made this process, counted by a pthread_atfork child handler (registered with the module). An
// object that remembers the count when its threads started tells a forked child, where those threads do not
// exist, by a mismatch: cheaper than getpid() per sample, and it sees every fork (os.fork, multiprocessing, C).
std::atomic<std::uint64_t> g_forks{0};
std::uint64_t fork_count() { return g_forks.load(std::memory_order_relaxed); }
void count_fork_in_child() { g_forks.fetch_add(1, std::memory_order_relaxed); }

// The live pipelines of this process, so that stop_pipelines() can stop and join them at interpreter exit (an
// iterator still referenced then, or leaked, must not leave a thread running into the C++ runtime's exit).
// Deliberately leaked, like Globals.
struct PipelineRegistry {
  std::mutex mu;
  std::set<SamplePipeline*> live;  // guarded by mu
};
PipelineRegistry& pipeline_registry() {
  static auto* r = new PipelineRegistry();
  return *r;
}

// SamplePipeline: a producer thread that reads a SampleStream ahead of the Python thread, so that the C++ stream's
// own work (tar headers, the manifest check of each sample, the mapping's page faults) runs on another core than
// the Python side's (Sample objects, the loop body). While Python converts and consumes batch k, the producer fills
// batch k+1, then hands it over in ready_ as soon as Python has taken batch k, and goes on with k+2.
//
// Contract:
//   - Ownership: the pipeline borrows the stream, which must outlive it (NativeStream destroys the pipeline first).
//     While the pipeline lives only its producer calls stream.next(); stream.stats() and stream.cancel() may be
//     called by any thread (sample_stream.hpp). Samples move from producer to consumer by value, under mu_ (a
//     SampleView owns its shard's mapping, so it can be read on any thread).
//   - Threads: the producer runs C++ only: it never touches a Python object, the GIL or the NativeStream. Taking a
//     batch (try_take(), take()) is for one consumer thread at a time, which NativeStream's busy_ check enforces;
//     take() may wait, so it is called without the GIL. stop() is for any thread, stop_and_join() for one at a
//     time (see there).
//   - Bounded: besides the batch Python is converting, at most two exist: one in ready_ and one being filled.
//   - Memory: Python hands each batch it has converted back (give_back()), and the producer destroys its samples
//     and refills the same vector. So the samples are made and freed on the producer's thread: no allocation is
//     freed by another thread than the one that made it, and a mapping's reference count is only ever changed by
//     the producer (no cache line bouncing between the cores per sample), which costs the Python side nothing.
//   - Shutdown: stop() sets stop_ and cancels the stream, so that a producer blocked in next() on a shard fetch
//     returns promptly (the download is cancelled at its next chunk, no new shard is started) and a consumer
//     waiting in take() gets an end. The destructor stops and joins the producer; it is never detached.
//   - Fork: the producer starts in the constructor, which NativeStream calls at the first next(), in the process
//     that iterates (a DataLoader worker, after the fork), never when the iterator is made. A process forked while
//     a pipeline lives has the pipeline's memory but not its thread (and maybe a lock the thread held): there the
//     pipeline must be leaked, never used or destroyed (forked() tells; NativeStream does so).
class SamplePipeline {
 public:
  explicit SamplePipeline(SampleStream& stream) : stream_(stream), forks_(fork_count()) {
    thread_ = std::thread([this] { run(); });
    std::lock_guard lock(pipeline_registry().mu);  // once the thread exists: a failed start registers nothing
    pipeline_registry().live.insert(this);
  }
  ~SamplePipeline() {
    {
      // Unregistered first: once this returns, stop_pipelines() is not (and will not be) joining this thread.
      std::lock_guard lock(pipeline_registry().mu);
      pipeline_registry().live.erase(this);
    }
    stop_and_join();
  }
  SamplePipeline(const SamplePipeline&) = delete;
  SamplePipeline& operator=(const SamplePipeline&) = delete;

  // Whether this process is a fork of the one that started the producer (which then does not run here).
  bool forked() const { return fork_count() != forks_; }

  // See the contract above. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    stream_.cancel();
  }

  // REQUIRES: not called concurrently with itself (the destructor runs it after leaving the registry, and
  // stop_pipelines() only for registered pipelines, holding the registry's lock).
  void stop_and_join() {
    stop();
    if (thread_.joinable()) thread_.join();
  }

  // Returns the samples of a batch Python has converted, for the producer to destroy and reuse (see Memory above).
  // Never waits but for mu_ (which the producer holds only to hand a batch over). May be called with the GIL.
  void give_back(std::vector<SampleView>&& spent) {
    if (spent.empty()) return;
    {
      std::lock_guard lock(mu_);
      if (spent_.empty()) spent_.swap(spent);  // else the producer has not taken the last one yet: freed here
    }
  }

  // The next batch if the producer has handed it over, else std::nullopt; never waits (but for mu_, which the
  // producer holds only to hand a batch over). May be called with the GIL.
  std::optional<SampleBatch> try_take() {
    std::optional<SampleBatch> batch;
    {
      std::lock_guard lock(mu_);
      batch.swap(ready_);
    }
    if (batch) cv_.notify_all();  // the producer may wait for ready_ to be empty
    return batch;
  }

  // The next batch, waiting for the producer; an empty batch with `end` once stopped. REQUIRES: the GIL released.
  SampleBatch take() {
    std::optional<SampleBatch> batch;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return ready_.has_value() || stop_; });
      batch.swap(ready_);
    }
    if (!batch) return SampleBatch{{}, std::nullopt, true};
    cv_.notify_all();
    return std::move(*batch);
  }

 private:
  void run() {
    for (;;) {
      SampleBatch batch;
      {
        std::lock_guard lock(mu_);
        batch.samples.swap(spent_);  // a converted batch (or nothing): its samples are destroyed on this thread
      }
      batch.samples.clear();
      batch.samples.reserve(k_batch);
      while (batch.samples.size() < k_batch) {
        auto sample = stream_.next();  // after stop() (stream_.cancel()): a cancelled Error at once
        if (!sample) {
          batch.error = std::move(sample).error();
          break;
        }
        if (!*sample) {
          batch.end = true;
          break;
        }
        batch.samples.push_back(std::move(**sample));
      }
      const bool last = batch.error || batch.end;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !ready_ || stop_; });
        if (stop_) return;
        ready_ = std::move(batch);
      }
      cv_.notify_all();
      if (last) return;  // nothing follows an error or the end: the thread ends, join() is immediate
    }
  }

  SampleStream& stream_;
  const std::uint64_t forks_;  // fork_count() when the producer started

  std::mutex mu_;
  std::condition_variable cv_;        // ready_ filled or emptied, or stop_ set
  std::optional<SampleBatch> ready_;  // guarded by mu_: the batch handed over, not yet taken
  std::vector<SampleView> spent_;     // guarded by mu_: the samples of a batch Python converted, given back
  bool stop_ = false;                 // guarded by mu_

  std::thread thread_;  // started by the constructor once every other member is initialised; joined, never detached
};

// atexit (datavo_sdk registers it): stops and joins every producer of this process still running, so that none
// runs on while the interpreter and the C++ runtime shut down. An iterator whose pipeline is stopped here sees the
// end of its stream. REQUIRES: the GIL released (a producer may take until its fetch's next chunk to stop).
void stop_pipelines() {
  auto& registry = pipeline_registry();
  std::lock_guard lock(registry.mu);
  for (SamplePipeline* pipeline : registry.live)
    if (!pipeline->forked()) pipeline->stop_and_join();  // a parent's pipeline, inherited by fork, has no thread here
}

// NativeStream: the iterator a SampleStream pass returns (`iter(stream)`): Python's side of one C++ SampleStream.
//
// Contract: every member is guarded by the GIL, and used by one Python thread at a time: next() refuses a second
// thread (busy_) while the first waits for a batch without the GIL. It owns the C++ stream and, from the first
// next() on, the SamplePipeline whose producer thread reads that stream (see above); the pipeline is destroyed
// (stopped, joined) before the stream. close() from another thread while one is inside next() only stops the
// pipeline; the iterating thread then ends the pass and finishes the close itself. In a forked child (where the
// producer and the stream's prefetcher threads do not exist) next() raises and close() / the destructor leak both
// rather than join threads that are not there.
class NativeStream {
 public:
  explicit NativeStream(const StreamArgs& args) : copy_(args.copy), prefetch_(args.prefetch), forks_(fork_count()) {
    if (args.keys.empty()) raise(Error{ErrorCode::invalid_argument, "SampleStream: keys must name at least one key"});
    auto name = unwrap(DatasetName::parse(args.dataset));
    OriginClientOptions origin;
    if (args.server) origin.server = *args.server;
    origin.token = args.token;
    origin.instance = args.instance;
    SampleStreamOptions options;
    options.keys = args.keys;
    options.cache = args.cache;
    options.cache_config_path = args.cache_config_path;
    options.rank = args.rank;
    options.world_size = args.world_size;
    options.worker = args.worker;
    options.num_workers = args.num_workers;
    options.order = args.shuffle ? ShardOrder::shuffled : ShardOrder::manifest;
    options.shuffle_seed = args.seed;
    options.epoch = args.epoch;
    options.prefetch_shards = args.prefetch;
    Result<SampleStream> stream = blocking([&]() -> Result<SampleStream> {
      // The manifest is resolved here, before the stream, so that a key the dataset lacks is told apart from a bad
      // argument: Manifest::normalize_keys() fails only for no key (checked above) or a missing one.
      auto client = OriginClient::create(std::move(origin));
      if (!client) return std::move(client).error();
      auto resolved = (*client)->manifest(name, args.revision);
      if (!resolved) return std::move(resolved).error();
      auto keys = resolved->manifest.normalize_keys(options.keys);
      if (!keys) return Error{ErrorCode::not_found, keys.error().message};
      // Pinned to the revision just resolved: the stream reads its manifest from the manifest cache (no request).
      options.revision = resolved->manifest.revision;
      options.client = std::move(*client);
      return SampleStream::from_dataset(name.full(), std::move(options));
    });
    stream_ = std::make_unique<SampleStream>(unwrap(std::move(stream)));
    for (const auto& key : stream_->keys())
      key_objects_.push_back(py::reinterpret_steal<py::str>(PyUnicode_InternFromString(key.c_str())));
  }

  // With the GIL held: the producer and the stream's threads never need it. The pipeline goes first (stopped and
  // joined: it reads the stream), then the stream (its prefetcher cancelled and joined).
  ~NativeStream() {
    if (inherited()) {
      leak();
      return;
    }
    pipeline_.reset();
    stream_.reset();
  }

  // The next Sample, or a null object at the end (no StopIteration object is made: tp_iternext's fast path).
  py::object next() {
    if (busy_) throw py::value_error("SampleStream iterator used by two threads at once (use one per thread)");
    struct Busy {
      bool& flag;
      ~Busy() { flag = false; }
    } busy{busy_};
    busy_ = true;
    // The threads that read this stream (the producer, the prefetcher's) exist in the process that made them only.
    // Refused from the first next() in a child, even with samples left in the batch: none of it is to be relied on.
    if (inherited())
      throw std::runtime_error(
          "this SampleStream iterator was made (or started) in another process and inherited by fork: its reader "
          "threads are not here; call iter() on the SampleStream in this process");
    for (;;) {
      if (closing_) {  // close() was called by another thread meanwhile
        close_now();
        return py::object();
      }
      if (position_ < batch_.size()) {
        return to_python(batch_[position_++]);  // the view stays in batch_: the producer destroys it (give_back())
      }
      if (pipeline_) pipeline_->give_back(std::move(batch_));
      batch_.clear();
      position_ = 0;
      if (error_) {
        Error error = *error_;  // sticky, like the C++ stream's; raised after the samples that came before it
        raise(error);
      }
      if (done_ || !stream_) return py::object();
      if (!pipeline_) pipeline_ = std::make_unique<SamplePipeline>(*stream_);  // the producer starts here
      std::optional<SampleBatch> batch = pipeline_->try_take();
      if (batch) {
        drain_logs();  // what the producer logged, as blocking() does below
      } else {
        batch = blocking([&] { return pipeline_->take(); });
      }
      batch_ = std::move(batch->samples);
      if (batch->error) error_ = std::move(batch->error);
      if (batch->end) done_ = true;
    }
  }

  void close() {
    if (busy_ && !inherited()) {
      // Another thread is inside next(), waiting for a batch without the GIL (or converting one): the pipeline and
      // the stream are in use. Stop the producer so that the wait ends; that thread finishes the close.
      closing_ = true;
      if (pipeline_) pipeline_->stop();
      return;
    }
    close_now();
  }

  const SampleStream& stream() const {
    if (!stream_) throw py::value_error("the SampleStream is closed");
    return *stream_;
  }

  py::dict stats() const {
    SampleStreamStats stats = stream().stats();
    py::dict out;
    out["samples"] = stats.samples;
    out["shards"] = stats.shards;
    out["field_bytes"] = stats.field_bytes.count();
    out["origin_fetches"] = stats.origin_fetches;
    out["origin_bytes"] = stats.origin_bytes.count();
    out["max_prefetched"] = stats.max_prefetched;
    py::list tiers;
    for (const auto& tier : stats.tiers) {
      py::dict row;
      row["tier"] = tier.tier;
      row["hits"] = tier.hits;
      row["misses"] = tier.misses;
      row["promotions"] = tier.promotions;
      tiers.append(row);
    }
    out["tiers"] = tiers;
    return out;
  }

 private:
  py::object base_view(const std::shared_ptr<const ShardMapping>& mapping) {
    if (mapping.get() != current_mapping_) {
      py::object buffer = py::cast(ShardBuffer{mapping});
      PyObject* view = PyMemoryView_FromObject(buffer.ptr());
      if (view == nullptr) throw py::error_already_set();
      const Py_buffer* b = PyMemoryView_GET_BUFFER(view);
      if (b->ndim != 1 || b->itemsize != 1 || b->strides == nullptr || b->strides[0] != 1 || b->shape == nullptr) {
        Py_DECREF(view);
        throw std::logic_error("ShardBuffer: expected a 1-D contiguous byte buffer");
      }
      current_view_ = py::reinterpret_steal<py::object>(view);
      current_mapping_ = mapping.get();
    }
    return current_view_;
  }

  // A memoryview of `data` (inside the shard `shard_view` covers) that shares shard_view's managed buffer, and so
  // keeps the mapping alive. Equivalent to shard_view[begin:end], without building two ints and a slice per field:
  // a new view of the whole buffer is registered on the same managed buffer, then narrowed before anyone sees it
  // (a 1-D read-only view of unsigned bytes, contiguous, so buf, len and shape[0] are all there is to set).
  static py::object field_view(const py::object& shard_view, std::span<const std::byte> data) {
    auto view = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(shard_view.ptr()));
    if (!view) throw py::error_already_set();
    Py_buffer* buffer = PyMemoryView_GET_BUFFER(view.ptr());
    buffer->buf = const_cast<std::byte*>(data.data());
    buffer->len = Py_ssize_t(data.size());
    buffer->shape[0] = Py_ssize_t(data.size());
    return view;
  }

  py::object to_python(const SampleView& view) {
    auto& g = globals();
    auto* type = reinterpret_cast<PyTypeObject*>(g.sample_type.ptr());
    // The Sample type adds no __init__: tp_new alone makes the (empty) dict.
    PyObject* raw = type->tp_new(type, g.empty_tuple.ptr(), nullptr);
    if (raw == nullptr) throw py::error_already_set();
    auto sample = py::reinterpret_steal<py::object>(raw);
    auto id =
        py::reinterpret_steal<py::object>(PyUnicode_FromStringAndSize(view.id.data(), Py_ssize_t(view.id.size())));
    if (!id || PyDict_SetItem(raw, g.key_field.ptr(), id.ptr()) != 0) throw py::error_already_set();
    py::object shard_view;
    if (!copy_ && view.mapping) shard_view = base_view(view.mapping);
    for (std::size_t i = 0; i < view.fields.size(); ++i) {
      const auto& field = view.fields[i];
      py::object key =
          i < key_objects_.size() && Py_ssize_t(field.key.size()) == PyUnicode_GET_LENGTH(key_objects_[i].ptr())
              ? py::object(key_objects_[i])
              : py::object(py::str(field.key));
      py::object value;
      if (copy_ || !shard_view) {
        value = py::reinterpret_steal<py::object>(
            PyBytes_FromStringAndSize(reinterpret_cast<const char*>(field.data.data()), Py_ssize_t(field.data.size())));
      } else {
        value = field_view(shard_view, field.data);
      }
      if (!value || PyDict_SetItem(raw, key.ptr(), value.ptr()) != 0) throw py::error_already_set();
    }
    return sample;
  }

  // Whether this process is a fork of one that started threads reading this stream: the pipeline's producer, or
  // the C++ stream's prefetcher threads (made with the stream, when prefetch_ > 0). Those threads do not exist here.
  bool inherited() const { return (pipeline_ && pipeline_->forked()) || (prefetch_ > 0 && fork_count() != forks_); }

  // Leaks the stream and the pipeline: in a forked child their threads do not exist, so destroying them would join
  // threads that are not there (and maybe wait on a lock one of them held at the fork).
  void leak() {
    (void)pipeline_.release();
    (void)stream_.release();
  }

  // REQUIRES: no other thread inside next().
  void close_now() {
    batch_.clear();
    position_ = 0;
    done_ = true;
    closing_ = false;
    if (!stream_) return;
    if (inherited()) {
      leak();
      return;
    }
    // Taken out with the GIL held, so that another thread calling next() or stats() meanwhile sees a closed stream,
    // then stopped and joined without it: the pipeline (its producer cancelled in any wait), then the stream (its
    // prefetcher cancels a download in progress at its next chunk).
    std::unique_ptr<SamplePipeline> pipeline = std::move(pipeline_);
    std::unique_ptr<SampleStream> stream = std::move(stream_);
    blocking([&] {
      pipeline.reset();
      stream.reset();
    });
  }

  bool copy_;
  std::size_t prefetch_;
  std::uint64_t forks_;   // fork_count() when the stream (and its prefetcher threads) was made
  bool busy_ = false;     // set while next() runs (it releases the GIL to wait for a batch)
  bool closing_ = false;  // close() was called while another thread was inside next()
  std::unique_ptr<SampleStream> stream_;
  std::unique_ptr<SamplePipeline> pipeline_;  // after stream_: destroyed first. Made by the first next()
  std::vector<py::str> key_objects_;
  std::vector<SampleView> batch_;
  std::size_t position_ = 0;
  bool done_ = false;
  std::optional<Error> error_;
  const ShardMapping* current_mapping_ = nullptr;
  py::object current_view_;
};

// tp_iternext of NativeStream, so that `for sample in stream` costs no pybind11 dispatch per sample.
PyObject* native_stream_iternext(PyObject* self) {
  try {
    return py::cast<NativeStream&>(py::handle(self)).next().release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (py::builtin_exception& e) {
    e.set_error();
  } catch (std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

}  // namespace
}  // namespace datavo::python

PYBIND11_MODULE(_datavo, m) {
  using namespace datavo;
  using namespace datavo::python;
  m.doc() = "Bindings of Datavo's C++ API; use the datavo_sdk package, not this module.";
  m.attr("__version__") = DATAVO_VERSION;

  m.def(
      "_init",
      [](py::dict error_types, py::object error_base, py::object sample_type) {
        auto& g = globals();
        g.error_types = std::move(error_types);
        g.error_base = std::move(error_base);
        g.sample_type = std::move(sample_type);
      },
      "Registers the exception classes and the Sample type (datavo_sdk does it at import).");
  m.def(
      "set_log_forwarding",
      [](py::object logger) {
        auto& g = globals();
        if (logger.is_none()) {
          set_log_sink({});
          drain_logs();
          g.logger = py::object();
          return;
        }
        g.logger = std::move(logger);
        set_log_sink(queue_line);
      },
      "Sends Datavo's log lines to `logger` (a logging.Logger), or back to stderr with None.");
  m.def("drain_logs", &drain_logs, "Hands the log lines queued so far to the logger.");
  m.def(
      "set_log_level", [](int level) { set_log_level(static_cast<LogLevel>(level)); },
      "0 error, 1 warning, 2 info, 3 debug.");
  m.def("log_level", [] { return static_cast<int>(log_level()); });
  m.def("tier_stat_names", &tier_stat_names, "The names of the per-tier counters, in order.");
  pthread_atfork(nullptr, nullptr, count_fork_in_child);
  m.def(
      "_stop_pipelines", [] { blocking(stop_pipelines); },
      "Stops and joins the SampleStream reader threads still running (datavo_sdk registers it with atexit).");

  py::class_<Tier, std::shared_ptr<Tier>>(m, "Tier", "A cache tier (C++ datavo::Tier).")
      .def_property_readonly("name", [](const Tier& t) { return t.name(); })
      .def_property_readonly("type", [](const Tier& t) { return std::string(t.type()); })
      .def_property_readonly("max_bytes", [](const Tier& t) { return optional_bytes(t.max_bytes()); })
      .def_property_readonly("supports_direct_read", &Tier::supports_direct_read)
      .def_property_readonly("read_only", &Tier::read_only)
      .def_property_readonly("location", &Tier::location);

  m.def(
      "make_tier",
      [](const std::string& type, const std::vector<std::tuple<std::string, std::string, bool>>& arguments,
         const std::string& origin) {
        std::vector<TierArgument> args;
        for (const auto& [key, value, quoted] : arguments) args.push_back(TierArgument{key, value, quoted});
        return make_tier_from_arguments(type, args, origin);
      },
      py::arg("type"), py::arg("arguments"), py::arg("origin"),
      "Builds a tier from shards.yaml-style (key, value text, quoted) settings. No I/O.");

  py::class_<ShardCacheHierarchy, std::shared_ptr<ShardCacheHierarchy>>(m, "Hierarchy")
      .def_property_readonly("tiers", [](const ShardCacheHierarchy& h) { return h.tiers(); })
      .def("get_or_fetch", &get_or_fetch, py::arg("content_hash"), py::arg("fetcher"), py::arg("instance") = py::none())
      .def("cache_info", &cache_info)
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

  py::class_<ShardBuffer>(m, "ShardBuffer", py::buffer_protocol(), "The read-only bytes of one mapped shard.")
      .def_buffer([](ShardBuffer& b) {
        auto bytes = b.mapping->bytes();
        return py::buffer_info(const_cast<std::byte*>(bytes.data()), 1, "B", 1, {py::ssize_t(bytes.size())}, {1},
                               /*readonly=*/true);
      });

  py::class_<StreamArgs>(m, "StreamArgs")
      .def(py::init<>())
      .def_readwrite("dataset", &StreamArgs::dataset)
      .def_readwrite("keys", &StreamArgs::keys)
      .def_readwrite("revision", &StreamArgs::revision)
      .def_readwrite("cache", &StreamArgs::cache)
      .def_readwrite("cache_config_path", &StreamArgs::cache_config_path)
      .def_readwrite("server", &StreamArgs::server)
      .def_readwrite("token", &StreamArgs::token)
      .def_readwrite("instance", &StreamArgs::instance)
      .def_readwrite("rank", &StreamArgs::rank)
      .def_readwrite("world_size", &StreamArgs::world_size)
      .def_readwrite("worker", &StreamArgs::worker)
      .def_readwrite("num_workers", &StreamArgs::num_workers)
      .def_readwrite("shuffle", &StreamArgs::shuffle)
      .def_readwrite("seed", &StreamArgs::seed)
      .def_readwrite("epoch", &StreamArgs::epoch)
      .def_readwrite("prefetch", &StreamArgs::prefetch)
      .def_readwrite("copy", &StreamArgs::copy);

  py::class_<NativeStream>(m, "NativeStream", py::custom_type_setup([](PyHeapTypeObject* heap_type) {
                             heap_type->ht_type.tp_iter = PyObject_SelfIter;
                             heap_type->ht_type.tp_iternext = native_stream_iternext;
                           }))
      .def(py::init<const StreamArgs&>())
      .def("close", &NativeStream::close)
      .def("stats", &NativeStream::stats)
      .def_property_readonly("keys", [](const NativeStream& s) { return s.stream().keys(); })
      .def_property_readonly("shard_indices", [](const NativeStream& s) { return s.stream().shard_indices(); })
      .def_property_readonly("revision", [](const NativeStream& s) { return s.stream().manifest().revision; })
      .def_property_readonly("shard_count", [](const NativeStream& s) { return s.stream().manifest().shards.size(); })
      .def_property_readonly("sample_count", [](const NativeStream& s) {
        std::size_t n = 0;
        for (const auto& shard : s.stream().manifest().shards) n += shard.samples.size();
        return n;
      });
}
