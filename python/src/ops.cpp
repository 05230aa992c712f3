// The cache's operations for Python: datavo::warm (warm.hpp), rm, check, gc and verify (operations.hpp) as OpJobs
// that run on a thread of their own while the calling Python thread waits without the GIL, polls a warm's progress
// (for a tqdm bar) and can take a KeyboardInterrupt, which stops the operation; ls and stats, which are quick,
// called in place without the GIL. Each report is handed over as a dict of the fields of the CLI's JSON (docs/cli.md)
// that datavo_sdk/_ops.py turns into dataclasses.
//
// Why a thread: a call made in place holds a KeyboardInterrupt until it returns. And warm() reports progress through
// a WarmObserver called from its worker threads: calling into Python from there would take the GIL inside a datavo
// worker, which can deadlock against a Python thread that waits for that worker (bindings.hpp, logging). So the
// observer only counts, in atomics, and Python reads the counts.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bindings.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/metrics.hpp"
#include "datavo/operations.hpp"
#include "datavo/warm.hpp"

namespace datavo::python {
namespace {

struct WarmArgs : DatasetArgs {
  std::size_t jobs = 4;
  bool allow_partial = false;
  std::optional<std::string> share;  // "I/N" (RegionShare::parse)
  std::uint64_t share_wait_seconds = 120;
};

// Counts what a running warm did, for the Python thread that polls it.
class CountingObserver final : public WarmObserver {
 public:
  void started(std::size_t shards) override { total_.store(shards); }
  void origin_bytes(std::int64_t delta) override { origin_bytes_.fetch_add(delta); }
  void shard_done(const WarmShardOutcome& outcome) override {
    done_.fetch_add(1);
    if (outcome.served) served_bytes_.fetch_add(outcome.served->size.count());
  }

  std::size_t total() const { return total_.load(); }
  std::size_t done() const { return done_.load(); }
  std::int64_t origin_bytes() const { return origin_bytes_.load(); }
  std::uint64_t served_bytes() const { return served_bytes_.load(); }

 private:
  std::atomic<std::size_t> total_{0};  // 0 until the manifest is resolved
  std::atomic<std::size_t> done_{0};
  std::atomic<std::int64_t> origin_bytes_{0};
  std::atomic<std::uint64_t> served_bytes_{0};
};

// One operation (warm, rm, check, gc, verify) on a thread of its own, so that the Python thread that waits for it can
// take a KeyboardInterrupt and stop it through the operation's stop flag: a call made in place would hold the
// interrupt until the whole operation ended. Contract: made, polled and destroyed by Python threads holding the GIL;
// the destructor stops the operation and joins its thread without the GIL.
class OpJob {
 public:
  // What makes the report's dict, called by the thread that asks for it (with the GIL); it may raise.
  using Presenter = std::function<py::dict()>;
  // The operation: runs without the GIL, stops when the flag turns true, returns its Presenter.
  using Run = std::function<Presenter(const std::atomic<bool>* stop)>;

  explicit OpJob(Run run)
      : thread_([this, run = std::move(run)] {
          Presenter presenter;
          try {
            presenter = run(&stop_);
          } catch (const std::exception& e) {
            presenter = [what = std::string(e.what())]() -> py::dict { throw std::runtime_error(what); };
          }
          std::lock_guard lock(mu_);
          presenter_ = std::move(presenter);
          cv_.notify_all();
        }) {}
  ~OpJob() {
    stop();
    py::gil_scoped_release release;
    thread_.join();
  }
  OpJob(const OpJob&) = delete;
  OpJob& operator=(const OpJob&) = delete;

  // Waits up to `seconds` for the operation to end, without the GIL; whether it has.
  bool wait(double seconds) {
    return blocking([&] {
      std::unique_lock lock(mu_);
      return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return presenter_ != nullptr; });
    });
  }

  // Stops the operation: it ends between objects, undoing what it began. Idempotent.
  void stop() { stop_.store(true); }

  // The report's dict. REQUIRES: wait() returned true.
  py::dict report() {
    Presenter presenter;
    {
      std::lock_guard lock(mu_);
      if (!presenter_) throw py::value_error("the operation is still running");
      presenter = presenter_;
    }
    return presenter();  // the operation's log lines were handed over by the wait() that saw it end
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  Presenter presenter_;  // guarded by mu_; set once, when the operation ends
  std::thread thread_;   // last: started once everything it uses exists
};

// A warm() as an OpJob, with the counts that Python polls for its progress bar.
class WarmJob {
 public:
  explicit WarmJob(const WarmArgs& args) : job_(run(request_of(args))) {}

  // (shards in the dataset, 0 until its manifest is resolved; shards done; bytes from the origin; bytes warmed)
  py::tuple progress() const {
    return py::make_tuple(observer_.total(), observer_.done(), observer_.origin_bytes(), observer_.served_bytes());
  }
  bool wait(double seconds) { return job_.wait(seconds); }
  void stop() { job_.stop(); }
  // The fields of `datavo warm --json` (docs/cli.md), its errors as exception objects (not raised); raises the
  // Error of a warm that could not run.
  py::dict report() { return job_.report(); }

 private:
  static py::dict report_dict(const WarmReport& r);
  static WarmRequest request_of(const WarmArgs& args) {
    WarmRequest request;
    request.dataset = args.dataset;
    request.keys = args.keys;
    request.revision = args.revision;
    request.cache = args.cache;
    request.cache_config_path = args.cache_config_path;
    request.origin = args.origin();
    request.jobs = args.jobs;
    request.allow_partial = args.allow_partial ? AllowPartial::yes : AllowPartial::no;
    if (args.share) {
      auto share = RegionShare::parse(*args.share);
      if (!share) raise(share.error());
      share->wait = Seconds(args.share_wait_seconds);
      request.share = *share;
    }
    return request;
  }
  OpJob::Run run(WarmRequest request) {
    return [this, request = std::move(request)](const std::atomic<bool>* stop) mutable -> OpJob::Presenter {
      request.observer = &observer_;
      request.stop = stop;
      auto report = std::make_shared<Result<WarmReport>>(warm(request));
      return [report]() -> py::dict {
        if (!*report) raise(report->error());
        return report_dict(report->value());
      };
    };
  }

  CountingObserver observer_;
  OpJob job_;  // after what its thread uses
};

py::object exception_or_none(const std::optional<Error>& error) { return error ? exception_of(*error) : py::none(); }

py::object str_or_none(const std::optional<std::string>& text) {
  return text ? py::object(py::str(*text)) : py::none();
}

py::dict tier_uploads_dict(const WarmTierUploads& up) {
  py::dict out;
  out["uploaded"] = up.uploaded;
  out["already_present"] = up.already_present;
  out["failed"] = up.failed;
  out["skipped"] = up.skipped;
  out["failed_reason"] = str_or_none(up.failed_reason);
  out["skipped_reason"] = str_or_none(up.skipped_reason);
  return out;
}

py::dict WarmJob::report_dict(const WarmReport& r) {
  py::dict out;
  out["dataset"] = r.dataset;
  out["revision"] = r.revision;
  out["keys"] = r.keys;
  out["shards"] = r.shards;
  out["failed"] = r.failed;
  out["size_bytes"] = r.size.count();
  out["origin_shards"] = r.origin_shards;
  out["origin_bytes"] = r.origin_size.count();
  py::list tiers;
  for (const auto& t : r.tiers) {
    py::dict row;
    row["tier"] = t.tier;
    row["hits"] = t.hits;
    row["promoted_into"] = t.promoted_into;
    row["cached"] = t.cached;
    row["held"] = t.held ? py::object(py::int_(*t.held)) : py::none();
    row["uploads"] = t.uploads ? py::object(tier_uploads_dict(*t.uploads)) : py::none();
    tiers.append(row);
  }
  out["tiers"] = tiers;
  out["not_cached"] = r.not_cached;
  out["seconds"] = r.elapsed.count();
  if (r.uploads) {
    py::dict uploads;
    uploads["uploaded"] = r.uploads->uploaded;
    uploads["already_present"] = r.uploads->already_present;
    uploads["failed"] = r.uploads->failed;
    uploads["skipped"] = r.uploads->skipped;
    uploads["pending"] = r.uploads->pending;
    out["uploads"] = uploads;
  } else {
    out["uploads"] = py::none();
  }
  py::list failures;
  for (const auto& f : r.failures) {
    py::dict row;
    row["shard_index"] = f.shard_index;
    row["error"] = exception_of(f.error);
    failures.append(row);
  }
  out["failures"] = failures;
  out["partial"] = r.partial ? py::object(py::str(*r.partial)) : py::none();
  out["error"] = exception_or_none(r.error);
  out["share"] = py::none();
  if (r.share) {
    py::dict share;
    share["index"] = r.share->share.index;
    share["count"] = r.share->share.count;
    share["deferred"] = r.share->deferred;
    share["from_region"] = r.share->from_region;
    share["fetched_after_wait"] = r.share->fetched_after_wait;
    share["waited_seconds"] = r.share->waited.count();
    out["share"] = share;
  }
  return out;
}

py::list failure_dicts(const std::vector<TierError>& failures) {
  py::list out;
  for (const auto& f : failures) {
    py::dict row;
    row["tier"] = f.tier;
    row["error"] = exception_of(f.error);
    out.append(row);
  }
  return out;
}

py::dict ls_dict(const CacheLsReport& r) {
  py::dict out;
  out["instance"] = r.instance;
  py::list entries;
  for (const auto& e : r.entries) {
    py::dict row;
    row["tier"] = e.tier;
    row["instance"] = e.entry.instance;
    row["content_hash"] = e.entry.hash.hex();
    row["size_bytes"] = e.entry.size.count();
    row["last_access"] = e.entry.last_access;
    row["dataset"] = e.shard ? py::object(py::str(e.shard->dataset)) : py::none();
    row["split"] = e.shard ? py::object(py::str(e.shard->split)) : py::none();
    row["revision"] = e.shard ? py::object(py::int_(e.shard->revision)) : py::none();
    row["shard_index"] = e.shard ? py::object(py::int_(e.shard->shard_index)) : py::none();
    row["keys"] = e.shard ? py::object(py::cast(e.shard->keys)) : py::none();
    entries.append(row);
  }
  py::list tiers;
  for (const auto& t : r.tiers) {
    py::dict row;
    row["tier"] = t.tier;
    row["entries"] = t.entries;
    row["size_bytes"] = t.size.count();
    row["listed"] = t.listed;
    tiers.append(row);
  }
  out["entries"] = r.entries.size();
  out["entry_list"] = entries;
  out["tiers"] = tiers;
  out["size_bytes"] = r.size.count();
  out["failures"] = failure_dicts(r.failures);
  out["error"] = exception_or_none(r.error);
  return out;
}

// An OpJob::Run from an operation that returns its report, and the function that turns the report into a dict.
template <class Operation, class Report>
OpJob::Run presenting(Operation operation, py::dict (*dict_of)(const Report&)) {
  return [operation = std::move(operation), dict_of](const std::atomic<bool>* stop) -> OpJob::Presenter {
    auto report = std::make_shared<Report>(operation(stop));
    return [report, dict_of] { return dict_of(*report); };
  };
}

// An OpJob that runs `operation` over `request`, given the job's stop flag as the request's `stop`.
template <class Request, class Report>
std::unique_ptr<OpJob> request_job(std::shared_ptr<ShardCacheHierarchy> cache, Request request,
                                   Report (*operation)(ShardCacheHierarchy&, const Request&),
                                   py::dict (*dict_of)(const Report&)) {
  return std::make_unique<OpJob>(presenting(
      [cache = std::move(cache), request = std::move(request), operation](const std::atomic<bool>* stop) {
        Request stoppable = request;
        stoppable.stop = stop;
        return operation(*cache, stoppable);
      },
      dict_of));
}

// `tier` names the tiers to remove from; `all_tiers` takes every writable tier; neither: the local tiers only.
// Python never asks for a confirmation: a shared tier is reached only when named or by all_tiers. Raises a bad
// argument here, before anything runs.
CacheRmRequest rm_request(const std::vector<py::str>& hashes, std::optional<std::string> dataset,
                          const std::optional<std::string>& instance, const std::vector<std::string>& tier,
                          bool all_tiers) {
  CacheRmRequest request;
  request.instance = resolve_instance(instance);
  for (const auto& hash : hashes) request.hashes.push_back(parse_hash(hash));
  request.dataset = std::move(dataset);
  if (all_tiers && !tier.empty()) throw py::value_error("cache.rm: give tier or all_tiers, not both");
  if (all_tiers) request.scope = RmScope::every_tier;
  if (!tier.empty()) {
    request.scope = RmScope::named;
    request.tiers = tier;
  }
  return request;
}

// Raises the Error of a removal that could not run.
py::dict rm_dict(const Result<CacheRmReport>& removal) {
  if (!removal) raise(removal.error());
  const CacheRmReport& r = *removal;
  py::dict out;
  py::list entries;
  for (const auto& e : r.entries) {
    py::dict row;
    row["content_hash"] = e.hash.hex();
    row["reason"] = e.reason == RmReason::named ? "named" : "of_dataset";
    row["removed_from"] = e.removed_from;
    row["failures"] = failure_dicts(e.failures);
    entries.append(row);
  }
  py::list tiers;
  py::list skipped;
  for (const auto& t : r.tiers) {
    py::dict row;
    row["tier"] = t.tier;
    row["type"] = t.type;
    row["location"] = t.location;
    row["shared"] = t.reach == TierReach::shared;
    row["touched"] = t.choice == RmTierChoice::removes;
    tiers.append(row);
    if (t.choice != RmTierChoice::removes) skipped.append(t.tier);
  }
  out["entry_list"] = entries;
  out["tiers"] = tiers;
  out["skipped_tiers"] = skipped;
  out["removed"] = r.removed;
  out["not_cached"] = r.not_cached;
  out["error"] = exception_or_none(r.error);
  return out;
}

py::dict gc_dict(const CacheGcReport& r) {
  py::dict out;
  out["dry_run"] = r.dry_run == DryRun::yes;
  py::list tiers;
  for (const auto& t : r.tiers) {
    py::dict row;
    row["tier"] = t.tier;
    row["type"] = t.type;
    row["policy"] = to_string(t.policy);
    row["max_age_seconds"] = t.max_age ? py::object(py::int_(t.max_age->count())) : py::object(py::none());
    row["evicted"] = t.eviction.entries_evicted;
    row["freed_bytes"] = t.eviction.bytes_freed.count();
    row["expired"] = t.eviction.expired;
    row["staging_swept"] = t.eviction.staging_swept;
    row["locks_swept"] = t.eviction.locks_swept;
    row["used_bytes"] = t.eviction.used_after.count();
    row["entries_bytes"] = t.eviction.entries_bytes_after.count();
    row["expired_leases"] = t.leftovers.expired_leases;
    row["stale_probes"] = t.leftovers.stale_probes;
    row["leftovers_removed"] = t.leftovers.removed;
    tiers.append(row);
  }
  out["tiers"] = tiers;
  out["failures"] = failure_dicts(r.failures);
  out["error"] = exception_or_none(r.error);
  return out;
}

py::list object_verify_rows(const CacheVerifyReport& r) {
  py::list rows;
  for (const auto& t : r.objects) {
    py::dict row;
    row["tier"] = t.tier;
    row["type"] = t.type;
    row["read_only"] = t.read_only;
    row["objects"] = t.verify.objects;
    row["verified_by_service"] = t.verify.verified_by_service;
    row["verified_by_download"] = t.verify.verified_by_download;
    row["metadata_only"] = t.verify.metadata_only;
    row["bad"] = t.verify.bad;
    row["removed"] = t.verify.removed;
    py::list bad;
    for (const auto& b : t.verify.bad_objects) {
      py::dict one;
      one["object"] = b.object;
      one["why"] = b.why;
      one["removed"] = b.removed;
      bad.append(one);
    }
    row["bad_objects"] = bad;
    row["error"] = exception_or_none(t.error);
    rows.append(row);
  }
  return rows;
}

py::dict verify_dict(const CacheVerifyReport& r) {
  py::dict out;
  out["repair"] = r.repair == Repair::yes;
  out["depth"] = to_string(r.depth);
  py::list tiers;
  for (const auto& t : r.tiers) {
    py::dict row;
    row["tier"] = t.tier;
    row["checked"] = t.verify.checked;
    row["ok"] = t.verify.ok;
    row["bad"] = t.verify.bad;
    row["unverifiable"] = t.verify.unverifiable;
    row["quarantined"] = t.verify.quarantined;
    row["bad_paths"] = t.verify.bad_paths;
    tiers.append(row);
  }
  out["tiers"] = tiers;
  py::list not_verified;
  for (const auto& t : r.not_verified) {
    py::dict row;
    row["tier"] = t.tier;
    row["type"] = t.type;
    row["why"] = t.why;
    not_verified.append(row);
  }
  out["not_verified"] = not_verified;
  out["objects"] = object_verify_rows(r);
  out["unrepaired"] = r.unrepaired;
  out["metadata_only"] = r.metadata_only;
  out["error"] = exception_or_none(r.error);
  return out;
}

py::dict check_dict(const CacheCheckReport& r) {
  py::dict out;
  py::list tiers;
  for (const auto& t : r.tiers) {
    py::dict row;
    row["tier"] = t.tier;
    row["type"] = t.type;
    row["location"] = t.location;
    row["read_only"] = t.read_only;
    row["ok"] = t.usable;
    row["readable"] = t.check.readable;
    row["writable"] = t.check.writable;
    py::list steps;
    for (const auto& step : t.check.steps) {
      py::dict one;
      one["step"] = step.name;
      one["ok"] = step.ok;
      one["detail"] = step.detail;
      steps.append(one);
    }
    row["steps"] = steps;
    row["warnings"] = t.check.warnings;
    tiers.append(row);
  }
  out["tiers"] = tiers;
  out["ok"] = r.ok;
  out["error"] = exception_or_none(r.error);
  return out;
}

// The tiers' counters after an optional reset (`datavo cache stats [--reset]`), as cache_info's rows.
py::list stats_rows(ShardCacheHierarchy& cache, bool reset) {
  const CacheStatsReport r =
      unwrap(blocking([&] { return cache_stats(cache, reset ? ResetStats::yes : ResetStats::no); }));
  py::list out;
  for (const auto& info : r.tiers) out.append(tier_info_dict(info));
  return out;
}

// tier_metrics() as ShardCacheHierarchy.metrics() documents it: tier -> {"type", "scope", metric -> value}.
py::dict metrics_dict(ShardCacheHierarchy& cache) {
  std::vector<TierInfo> tiers = blocking([&] { return cache.cache_info(); });
  py::dict out;
  for (const auto& t : tiers) {
    py::dict row;
    row["type"] = t.type;
    row["scope"] = to_string(t.scope);
    out[py::str(t.name)] = row;
  }
  const std::string prefix = "datavo_tier_";
  for (const auto& family : tier_metrics(tiers)) {
    if (family.name == "datavo_tier_info") continue;  // its one label is "scope", above
    const py::str key(family.name.substr(prefix.size()));
    for (const auto& sample : family.samples) {
      py::dict row = out[py::str(sample.tier)].cast<py::dict>();
      if (!sample.label) {
        row[key] = sample.value;
        continue;
      }
      if (!row.contains(key)) row[key] = py::dict();
      py::dict by_label = row[key].cast<py::dict>();
      by_label[py::str(sample.label->second)] = sample.value;
    }
  }
  return out;
}

// ShardCacheHierarchy.metrics_textfile(): the MetricsTextfile, stopped by close() (or the with block's end).
class PyMetricsTextfile {
 public:
  PyMetricsTextfile(std::shared_ptr<ShardCacheHierarchy> cache, const std::string& path, double interval_seconds)
      : file_(unwrap(blocking([&] {
          const auto interval = std::chrono::milliseconds(std::max<long long>(1, llround(interval_seconds * 1000)));
          return MetricsTextfile::start(std::move(cache), path, interval);
        }))),
        path_(path) {}
  ~PyMetricsTextfile() { close(); }
  void close() {
    if (!file_) return;
    blocking([&] { file_.reset(); });  // joins its thread and writes the file a last time
  }
  const std::string& path() const { return path_; }

 private:
  std::unique_ptr<MetricsTextfile> file_;
  std::string path_;
};

}  // namespace

void bind_ops(py::module_& m) {
  m.def("tier_metrics", &metrics_dict, py::arg("cache"));
  m.def(
      "render_metrics",
      [](ShardCacheHierarchy& cache) {
        return render_prometheus(tier_metrics(blocking([&] { return cache.cache_info(); })));
      },
      py::arg("cache"));
  py::class_<PyMetricsTextfile>(m, "MetricsTextfile")
      .def(py::init<std::shared_ptr<ShardCacheHierarchy>, const std::string&, double>(), py::arg("cache"),
           py::arg("path"), py::arg("interval"))
      .def_property_readonly("path", &PyMetricsTextfile::path)
      .def("close", &PyMetricsTextfile::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyMetricsTextfile& self, py::args) { self.close(); });
  // ls, rm, check, gc and verify can take long (a bucket's every object): each runs as an OpJob that Python can stop.
  m.def(
      "cache_ls",
      [](std::shared_ptr<ShardCacheHierarchy> cache, const std::optional<std::string>& instance) {
        CacheLsRequest request;
        if (instance) request.instance = unwrap(Instance::parse(*instance));  // raised here, before anything runs
        return request_job(std::move(cache), std::move(request), &cache_ls, &ls_dict);
      },
      py::arg("cache"), py::arg("instance"));
  m.def(
      "cache_rm",
      [](std::shared_ptr<ShardCacheHierarchy> cache, const std::vector<py::str>& hashes,
         std::optional<std::string> dataset, const std::optional<std::string>& instance,
         const std::vector<std::string>& tier, bool all_tiers) {
        return request_job(std::move(cache), rm_request(hashes, std::move(dataset), instance, tier, all_tiers),
                           &cache_rm, &rm_dict);
      },
      py::arg("cache"), py::arg("hashes"), py::arg("dataset"), py::arg("instance"), py::arg("tier"),
      py::arg("all_tiers"));
  m.def(
      "cache_gc",
      [](std::shared_ptr<ShardCacheHierarchy> cache, bool dry_run) {
        return std::make_unique<OpJob>(presenting(
            [cache, dry_run](auto stop) { return cache_gc(*cache, dry_run ? DryRun::yes : DryRun::no, stop); },
            &gc_dict));
      },
      py::arg("cache"), py::arg("dry_run"));
  m.def(
      "cache_verify",
      [](std::shared_ptr<ShardCacheHierarchy> cache, bool repair, bool full) {
        return std::make_unique<OpJob>(presenting(
            [cache, repair, full](auto stop) {
              return cache_verify(*cache, repair ? Repair::yes : Repair::no,
                                  full ? VerifyDepth::full : VerifyDepth::metadata, stop);
            },
            &verify_dict));
      },
      py::arg("cache"), py::arg("repair"), py::arg("full"));
  m.def(
      "cache_check",
      [](std::shared_ptr<ShardCacheHierarchy> cache) {
        return std::make_unique<OpJob>(
            presenting([cache](auto stop) { return cache_check(*cache, stop); }, &check_dict));
      },
      py::arg("cache"));
  py::class_<OpJob>(m, "OpJob").def("wait", &OpJob::wait).def("stop", &OpJob::stop).def("report", &OpJob::report);
  m.def("cache_stats", &stats_rows, py::arg("cache"), py::arg("reset"));

  py::class_<WarmArgs> warm_args(m, "WarmArgs");
  bind_dataset_args(warm_args);
  warm_args.def(py::init<>())
      .def_readwrite("jobs", &WarmArgs::jobs)
      .def_readwrite("allow_partial", &WarmArgs::allow_partial)
      .def_readwrite("share", &WarmArgs::share)
      .def_readwrite("share_wait_seconds", &WarmArgs::share_wait_seconds);

  py::class_<WarmJob>(m, "WarmJob")
      .def(py::init<const WarmArgs&>())
      .def("progress", &WarmJob::progress)
      .def("wait", &WarmJob::wait)
      .def("stop", &WarmJob::stop)
      .def("report", &WarmJob::report);
}

}  // namespace datavo::python
