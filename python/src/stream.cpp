// The samples: one pass over a C++ SampleStream as a Python iterator (NativeStream), read ahead by the library's
// SamplePipeline, each sample a datavo_sdk.Sample of memoryviews into its shard's mapping; or, for
// SampleStream.batches(), each pipeline batch a datavo_sdk.Batch (fixed-size fields as one 2-D array).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "datavo/sample_pipeline.hpp"
#include "datavo/sample_stream.hpp"

namespace datavo::python {
namespace {

// The read-only buffer of one mapped shard. Field memoryviews are slices of one memoryview over it, so they all
// keep it (and through it the mapping) alive.
struct ShardBuffer {
  std::shared_ptr<const ShardMapping> mapping;
};

// The bytes of one fixed-size field over the samples of a batch, as a 2-D buffer (samples x field size): a strided
// view into one shard's mapping, which it keeps alive (read-only), or a contiguous copy of its own (read-only unless
// the stream copies: then every array is the caller's to write).
struct FieldBlock {
  std::shared_ptr<const ShardMapping> mapping;  // set for a view
  std::vector<std::byte> copy;                  // holds the bytes of a copy
  const std::byte* data = nullptr;              // a view's first field (a copy's bytes are copy.data())
  py::ssize_t rows = 0, size = 0, stride = 0;
  bool writable = false;
};

// NumPy's C API (pybind11's table of it): 2-D uint8 arrays over memory that `base` keeps alive, made without the
// buffer protocol (numpy.asarray on a buffer object makes a memoryview and parses its format, per array).
struct NumpyApi {
  py::detail::npy_api& api;
  py::dtype uint8;

  py::object array(const std::byte* data, Py_ssize_t rows, Py_ssize_t size, Py_ssize_t stride, bool writable,
                   const py::object& base) const {
    const Py_intptr_t shape[2] = {rows, size};
    const Py_intptr_t strides[2] = {stride, 1};
    auto array = py::reinterpret_steal<py::object>(api.PyArray_NewFromDescr_(
        api.PyArray_Type_, uint8.inc_ref().ptr(), 2, shape, strides, const_cast<std::byte*>(data),
        writable ? py::detail::npy_api::NPY_ARRAY_WRITEABLE_ : 0, nullptr));  // steals the descriptor
    if (!array) throw py::error_already_set();
    if (api.PyArray_SetBaseObject_(array.ptr(), base.inc_ref().ptr()) != 0) throw py::error_already_set();  // steals
    return array;
  }
};

// The API when NumPy is importable, else nullptr (arrays are then 2-D memoryviews); looked up by the first batch
// (importing NumPy costs a job that never asks for batches nothing).
const NumpyApi* numpy_api() {
  static const NumpyApi* found = []() -> const NumpyApi* {
    try {
      return new NumpyApi{py::detail::npy_api::get(), py::dtype::of<std::uint8_t>()};  // leaked, as Globals is
    } catch (py::error_already_set&) {
      return nullptr;
    }
  }();
  return found;
}

struct StreamArgs : DatasetArgs {
  std::size_t rank = 0, world_size = 1, worker = 0, num_workers = 1;
  bool shuffle = false;
  std::uint64_t seed = 0, epoch = 0;
  std::size_t prefetch = SampleStreamOptions{}.prefetch_shards;
  double prefetch_budget = SampleStreamOptions{}.prefetch_budget;
  std::optional<std::size_t> local_world_size;
  bool order_hints = SampleStreamOptions{}.order_hints == OrderHints::on;
  std::uint64_t hint_step_ms = std::uint64_t(SampleStreamOptions{}.hint_step.count());
  std::size_t shuffle_buffer = 0;
  bool read_while_fetching = SampleStreamOptions{}.read_while_fetching == ReadWhileFetching::on;
  bool stream = false;  // ReadMode::streamed
  std::uint64_t stream_window = SampleStreamOptions{}.stream_window.count();
  bool copy = false;
  std::size_t batch_size = 0;                     // > 0: iteration yields Batch objects of this many samples
  std::optional<std::vector<std::string>> fixed;  // the keys to stack (each batch's fields of one size); none: auto
  bool drop_last = false;                         // drop a last batch of fewer than batch_size samples
};

// How a batch gives the fields of one key.
enum class Stacking {
  when_one_size,  // a 2-D array when the batch's fields all have one size, else a list (fixed="auto")
  always,         // a 2-D array; fields of different sizes are a ValueError
  never,          // a list of memoryviews (bytes when copying)
};

SampleStreamOptions stream_options(const StreamArgs& args) {
  SampleStreamOptions options;
  options.origin = args.origin();
  options.keys = args.keys;
  options.revision = args.revision;
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
  options.prefetch_budget = args.prefetch_budget;
  options.local_world_size = args.local_world_size;
  options.order_hints = args.order_hints ? OrderHints::on : OrderHints::off;
  options.hint_step = Milliseconds{args.hint_step_ms};
  options.shuffle_buffer = args.shuffle_buffer;
  options.read_while_fetching = args.read_while_fetching ? ReadWhileFetching::on : ReadWhileFetching::off;
  options.read_mode = args.stream ? ReadMode::streamed : ReadMode::cached;
  options.stream_window = Bytes{args.stream_window};
  return options;
}

// The producer's largest batch for Python batches of `batch_size`: whole Python batches, at least
// k_largest_handover samples. Its batches grow to that from one Python batch (SamplePipeline's Batch sizes), so that
// a loop faster than the producer waits for it (a futex sleep and a wake-up, which cost both threads CPU time) about
// once per k_largest_handover samples, not once per batch: at one hand-over per batch of 64 that was 1.5 context
// switches per batch, and the batch path 0.8x the C++ loop's CPU time (docs/BENCHMARKS-python.md, where 256 to
// 2,048 measured alike and 4,096 worse). Single samples keep batches of 64: larger ones measured no faster there.
constexpr std::size_t k_largest_handover = 1024;
std::size_t largest_handover(std::size_t batch_size) {
  return batch_size * ((k_largest_handover + batch_size - 1) / batch_size);
}

// NativeStream: the iterator a SampleStream pass returns (`iter(stream)`): Python's side of one C++ SampleStream.
//
// Contract: every member is guarded by the GIL, and used by one Python thread at a time: next() refuses a second
// thread (busy_) while the first waits for a batch without the GIL. It owns the C++ stream and, from the first
// next() on, the SamplePipeline whose producer thread reads that stream (sample_pipeline.hpp); the pipeline is
// destroyed (stopped, joined) before the stream. close() from another thread while one is inside next() only stops the
// pipeline; the iterating thread then ends the pass and finishes the close itself. In a forked child (where the
// producer and the stream's prefetcher threads do not exist) next() raises and close() / the destructor leak both
// rather than join threads that are not there.
class NativeStream {
 public:
  explicit NativeStream(const StreamArgs& args)
      : copy_(args.copy), prefetch_(args.prefetch), batch_size_(args.batch_size), drop_last_(args.drop_last) {
    SampleStreamOptions options = stream_options(args);
    stream_ = std::make_unique<SampleStream>(
        unwrap(blocking([&] { return SampleStream::from_dataset(args.dataset, std::move(options)); })));
    for (const auto& key : stream_->keys()) {
      key_objects_.push_back(py::reinterpret_steal<py::str>(PyUnicode_InternFromString(key.c_str())));
      const bool named = args.fixed && std::find(args.fixed->begin(), args.fixed->end(), key) != args.fixed->end();
      stacking_.push_back(!args.fixed ? Stacking::when_one_size : named ? Stacking::always : Stacking::never);
    }
    if (args.fixed) {
      for (const auto& key : *args.fixed) {
        const auto& keys = stream_->keys();
        if (std::find(keys.begin(), keys.end(), key) == keys.end())
          throw py::value_error("fixed names key '" + key + "', which the stream does not read");
      }
    }
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
        if (batch_size_ == 0) return to_python(batch_[position_++]);  // the view stays in batch_ (give_back())
        // A hand-over holds whole batches (largest_handover()): only the stream's last one can end short.
        const std::size_t n = std::min(batch_size_, batch_.size() - position_);
        std::span<const SampleView> samples(batch_.data() + position_, n);
        position_ += n;
        if (!drop_last_ || n == batch_size_) return to_python(samples);
        continue;  // a short last batch, dropped
      }
      if (pipeline_) pipeline_->give_back(std::move(batch_));
      batch_.clear();
      position_ = 0;
      if (error_) {
        Error error = *error_;  // sticky, like the C++ stream's; raised after the samples that came before it
        raise(error);
      }
      if (done_ || !stream_) return py::object();
      if (!pipeline_) {  // the producer starts here
        pipeline_ = batch_size_ > 0
                        ? std::make_unique<SamplePipeline>(*stream_, largest_handover(batch_size_), batch_size_)
                        : std::make_unique<SamplePipeline>(*stream_);
      }
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
    out["shard_wait_seconds"] = std::chrono::duration<double>(stats.shard_wait).count();
    out["shard_wait_after_first_seconds"] = std::chrono::duration<double>(stats.shard_wait_after_first).count();
    out["max_prefetched_bytes"] = stats.max_prefetched_bytes.count();
    out["hints_placed"] = stats.hints_placed;
    out["shuffle_buffered"] = stats.shuffle_buffered;
    out["max_shuffle_buffered"] = stats.max_shuffle_buffered;
    out["streamed_shards"] = stats.streamed_shards;
    out["streamed_bytes"] = stats.streamed_bytes.count();
    out["max_stream_buffered"] = stats.max_stream_buffered.count();
    py::list tiers;
    for (const auto& tier : stats.tiers) {
      py::dict row;
      row["tier"] = tier.tier;
      row["hits"] = tier.hits;
      row["misses"] = tier.misses;
      row["promotions"] = tier.promotions;
      row["served_bytes"] = tier.served_bytes.count();
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
      current_buffer_ = std::move(buffer);
      current_mapping_ = mapping.get();
    }
    return current_view_;
  }

  // The ShardBuffer of `mapping` (the one base_view() views): an object that keeps the mapping alive and, unlike a
  // memoryview, cannot be released.
  py::object shard_buffer(const std::shared_ptr<const ShardMapping>& mapping) {
    base_view(mapping);
    return current_buffer_;
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

  // One Batch of `samples` (at least one): "__key__" the list of ids, then per key a 2-D array (see Stacking) or a
  // list. An array is a view of the mapping when the batch's fields of that key lie at one stride in one shard (as
  // a tar of fixed-size members lays them out), else a copy.
  py::object to_python(std::span<const SampleView> samples) {
    auto& g = globals();
    auto* type = reinterpret_cast<PyTypeObject*>(g.batch_type.ptr());
    PyObject* raw = type->tp_new(type, g.empty_tuple.ptr(), nullptr);
    if (raw == nullptr) throw py::error_already_set();
    auto batch = py::reinterpret_steal<py::object>(raw);
    const auto n = Py_ssize_t(samples.size());
    auto ids = py::reinterpret_steal<py::object>(PyList_New(n));
    if (!ids) throw py::error_already_set();
    for (Py_ssize_t i = 0; i < n; ++i) {
      const std::string& id = samples[std::size_t(i)].id;
      PyObject* str = PyUnicode_FromStringAndSize(id.data(), Py_ssize_t(id.size()));
      if (str == nullptr) throw py::error_already_set();
      PyList_SET_ITEM(ids.ptr(), i, str);
    }
    if (PyDict_SetItem(raw, g.key_field.ptr(), ids.ptr()) != 0) throw py::error_already_set();
    for (std::size_t k = 0; k < key_objects_.size(); ++k) {
      const SampleView* odd = nullptr;  // the first sample whose field differs in size from the first one's
      const std::size_t size = field_of(samples.front(), k).size();
      if (stacking_[k] != Stacking::never) {
        for (const auto& sample : samples) {
          if (field_of(sample, k).size() != size) {
            odd = &sample;
            break;
          }
        }
      }
      py::object value;
      if (stacking_[k] == Stacking::never || (stacking_[k] == Stacking::when_one_size && odd != nullptr)) {
        value = field_list(samples, k);
      } else if (odd != nullptr) {
        throw py::value_error("fixed key '" + stream_->keys()[k] + "' has fields of different sizes in one batch: " +
                              std::to_string(size) + " bytes in sample '" + samples.front().id + "', " +
                              std::to_string(field_of(*odd, k).size()) + " in sample '" + odd->id + "'");
      } else {
        value = field_array(samples, k, size);
      }
      if (PyDict_SetItem(raw, key_objects_[k].ptr(), value.ptr()) != 0) throw py::error_already_set();
    }
    return batch;
  }

  std::span<const std::byte> field_of(const SampleView& sample, std::size_t k) const {
    // The stream gives every sample its fields in the order of keys() (sample_stream.hpp).
    if (k >= sample.fields.size()) throw std::logic_error("SampleStream: a sample lacks a field of its key group");
    return sample.fields[k].data;
  }

  py::object field_list(std::span<const SampleView> samples, std::size_t k) {
    auto list = py::reinterpret_steal<py::object>(PyList_New(Py_ssize_t(samples.size())));
    if (!list) throw py::error_already_set();
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const auto data = field_of(samples[i], k);
      py::object value;
      if (copy_ || !samples[i].mapping) {
        value = py::reinterpret_steal<py::object>(
            PyBytes_FromStringAndSize(reinterpret_cast<const char*>(data.data()), Py_ssize_t(data.size())));
        if (!value) throw py::error_already_set();
      } else {
        value = field_view(base_view(samples[i].mapping), data);
      }
      PyList_SET_ITEM(list.ptr(), Py_ssize_t(i), value.release().ptr());
    }
    return list;
  }

  py::object field_array(std::span<const SampleView> samples, std::size_t k, std::size_t size) {
    FieldBlock block;
    block.rows = Py_ssize_t(samples.size());
    block.size = Py_ssize_t(size);
    const std::byte* first = field_of(samples.front(), k).data();
    const std::ptrdiff_t stride = samples.size() > 1 ? field_of(samples[1], k).data() - first : std::ptrdiff_t(size);
    bool view = !copy_ && samples.front().mapping && stride >= std::ptrdiff_t(size) && stride > 0;
    for (std::size_t i = 1; view && i < samples.size(); ++i) {
      view = samples[i].mapping == samples.front().mapping &&
             field_of(samples[i], k).data() == first + std::ptrdiff_t(i) * stride;
    }
    const NumpyApi* numpy = numpy_api();
    if (view && numpy != nullptr) {
      // The array's base is the shard's buffer object, which this stream keeps for the shard anyway: no object made
      // per batch but the array.
      return numpy->array(first, block.rows, block.size, stride, /*writable=*/false,
                          shard_buffer(samples.front().mapping));
    }
    if (view) {
      block.mapping = samples.front().mapping;
      block.data = first;
      block.stride = stride;
    } else {
      block.copy.resize(samples.size() * size);
      for (std::size_t i = 0; i < samples.size(); ++i)
        std::memcpy(block.copy.data() + i * size, field_of(samples[i], k).data(), size);
      block.stride = Py_ssize_t(size);
      block.writable = copy_;
    }
    const std::byte* data = block.mapping ? block.data : block.copy.data();  // a vector's bytes stay where they are
    const Py_ssize_t rows = block.rows, row_stride = block.stride;
    const bool writable = block.writable;
    py::object buffer = py::cast(std::move(block));
    if (numpy != nullptr) return numpy->array(data, rows, Py_ssize_t(size), row_stride, writable, buffer);
    auto memoryview = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(buffer.ptr()));
    if (!memoryview) throw py::error_already_set();
    return memoryview;
  }

  // Whether this process is a fork of one that started threads reading this stream: the pipeline's producer, or
  // the C++ stream's prefetcher threads (made with the stream, when prefetch_ > 0). Those threads do not exist here.
  bool inherited() const { return (pipeline_ && pipeline_->forked()) || (prefetch_ > 0 && made_in_.forked()); }

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
  std::size_t batch_size_;  // 0: next() yields samples, else batches of this many
  bool drop_last_;
  std::vector<Stacking> stacking_;  // per key, in the order of the stream's keys()
  ForkDetector made_in_;            // the process that made the stream (and its prefetcher threads)
  bool busy_ = false;               // set while next() runs (it releases the GIL to wait for a batch)
  bool closing_ = false;            // close() was called while another thread was inside next()
  std::unique_ptr<SampleStream> stream_;
  std::unique_ptr<SamplePipeline> pipeline_;  // after stream_: destroyed first. Made by the first next()
  std::vector<py::str> key_objects_;
  std::vector<SampleView> batch_;
  std::size_t position_ = 0;
  bool done_ = false;
  std::optional<Error> error_;
  const ShardMapping* current_mapping_ = nullptr;
  py::object current_view_;    // a memoryview of current_buffer_
  py::object current_buffer_;  // the ShardBuffer of current_mapping_
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

void bind_stream(py::module_& m) {
  m.def(
      "_stop_pipelines", [] { blocking(stop_sample_pipelines); },
      "Stops and joins the SampleStream reader threads still running (datavo_sdk registers it with atexit).");

  py::class_<ShardBuffer>(m, "ShardBuffer", py::buffer_protocol(), "The read-only bytes of one mapped shard.")
      .def_buffer([](ShardBuffer& b) {
        auto bytes = b.mapping->bytes();
        return py::buffer_info(const_cast<std::byte*>(bytes.data()), 1, "B", 1, {py::ssize_t(bytes.size())}, {1},
                               /*readonly=*/true);
      });

  py::class_<FieldBlock>(m, "FieldBlock", py::buffer_protocol(),
                         "The bytes of one fixed-size field over a batch (samples x size).")
      .def_buffer([](FieldBlock& b) {
        const std::byte* data = b.mapping ? b.data : b.copy.data();
        return py::buffer_info(const_cast<std::byte*>(data), 1, "B", 2, {b.rows, b.size}, {b.stride, py::ssize_t(1)},
                               /*readonly=*/!b.writable);
      });

  py::class_<StreamArgs> stream_args(m, "StreamArgs");
  bind_dataset_args(stream_args);
  stream_args.def(py::init<>())
      .def_readwrite("rank", &StreamArgs::rank)
      .def_readwrite("world_size", &StreamArgs::world_size)
      .def_readwrite("worker", &StreamArgs::worker)
      .def_readwrite("num_workers", &StreamArgs::num_workers)
      .def_readwrite("shuffle", &StreamArgs::shuffle)
      .def_readwrite("seed", &StreamArgs::seed)
      .def_readwrite("epoch", &StreamArgs::epoch)
      .def_readwrite("prefetch", &StreamArgs::prefetch)
      .def_readwrite("prefetch_budget", &StreamArgs::prefetch_budget)
      .def_readwrite("local_world_size", &StreamArgs::local_world_size)
      .def_readwrite("order_hints", &StreamArgs::order_hints)
      .def_readwrite("hint_step_ms", &StreamArgs::hint_step_ms)
      .def_readwrite("shuffle_buffer", &StreamArgs::shuffle_buffer)
      .def_readwrite("read_while_fetching", &StreamArgs::read_while_fetching)
      .def_readwrite("stream", &StreamArgs::stream)
      .def_readwrite("stream_window", &StreamArgs::stream_window)
      .def_readwrite("copy", &StreamArgs::copy)
      .def_readwrite("batch_size", &StreamArgs::batch_size)
      .def_readwrite("fixed", &StreamArgs::fixed)
      .def_readwrite("drop_last", &StreamArgs::drop_last);

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
      .def_property_readonly("sample_count",
                             [](const NativeStream& s) {
                               std::size_t n = 0;
                               for (const auto& shard : s.stream().manifest().shards) n += shard.samples.size();
                               return n;
                             })
      .def_property_readonly("consumer_sample_count", [](const NativeStream& s) {
        // The stream yields every sample the manifest lists for each of its shards (it fails otherwise).
        const auto& shards = s.stream().manifest().shards;
        std::size_t n = 0;
        for (std::uint64_t index : s.stream().shard_indices()) n += shards.at(index).samples.size();
        return n;
      });
}

}  // namespace datavo::python
