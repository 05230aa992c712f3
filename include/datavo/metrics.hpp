// Per-tier metrics in the Prometheus text exposition format (version 0.0.4), and the textfile that a long job
// rewrites for node_exporter's textfile collector. One renderer: `datavo cache stats --format prometheus`, the
// textfile of `warm` and `read` (--metrics-textfile) and the Python SDK's ShardCacheHierarchy.metrics() all show
// tier_metrics() of the same TierInfo rows (ShardCacheHierarchy::cache_info()).
//
// The metrics (docs/cli.md lists them), each with the labels tier="<name>" and type="<tier type>":
//   counters   datavo_tier_{hits,misses,promotions,installs,capacity_skips,evictions,quarantined,errors}_total,
//              datavo_tier_uploads_total{outcome="uploaded|already_present|failed|skipped"},
//              datavo_tier_lease_waits_total, datavo_tier_served_bytes_total (bytes out to readers),
//              datavo_tier_installed_bytes_total (bytes in: installs, promotions, uploads)
//   gauges     datavo_tier_breaker_open (0|1, this process's breaker), datavo_tier_used_bytes, datavo_tier_entries,
//              datavo_tier_max_bytes (when measured / bounded), datavo_tier_info{scope=...} 1
// A counter that a tier cannot keep (TierInfo::kept: a bucket's evictions, a folder tier's uploads) has no sample
// for that tier, rather than a zero.
//
// Thread safety: the functions are reentrant; a MetricsTextfile is used by one owner (its thread is its own).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "datavo/hierarchy.hpp"
#include "datavo/result.hpp"

namespace datavo {

enum class MetricKind { counter, gauge };
// "counter", "gauge".
const char* to_string(MetricKind kind);

struct MetricSample {
  std::string tier;
  std::string type;
  // A third label, for the metrics that split by one (uploads by outcome): {"outcome", "uploaded"}.
  std::optional<std::pair<std::string, std::string>> label;
  std::uint64_t value = 0;
};

struct MetricFamily {
  std::string name;  // the full name, e.g. "datavo_tier_hits_total"
  MetricKind kind = MetricKind::counter;
  std::string help;
  std::vector<MetricSample> samples;  // tier by tier, in the order of the rows given
};

// The metrics of `tiers`, in the order of the list above; a family with no sample is left out.
std::vector<MetricFamily> tier_metrics(const std::vector<TierInfo>& tiers);

// The text exposition format 0.0.4 of `families`: "# HELP", "# TYPE", then one line per sample, label values
// escaped (\\, \", \n) and HELP text escaped (\\, \n); ends with a newline.
std::string render_prometheus(const std::vector<MetricFamily>& families);

// Keeps the file `path` holding render_prometheus() of a hierarchy's metrics: written at start(), rewritten every
// `interval` by a thread of its own and once more at destruction, each time atomically (a temporary beside it,
// renamed: a reader, such as node_exporter's textfile collector, never sees half a file). Name the file "*.prom"
// for the collector; the temporary's name does not end so. A rewrite that fails is a WARNING (once), not an
// error of the job.
class MetricsTextfile {
 public:
  static constexpr std::chrono::seconds k_default_interval{5};

  // Writes the file once; an Error (naming the path) when it cannot be written, so that a typo fails at once.
  // REQUIRES: interval > 0.
  static Result<std::unique_ptr<MetricsTextfile>> start(std::shared_ptr<ShardCacheHierarchy> cache, std::string path,
                                                        std::chrono::milliseconds interval = k_default_interval);
  // Stops the thread and writes the file a last time.
  ~MetricsTextfile();
  MetricsTextfile(const MetricsTextfile&) = delete;
  MetricsTextfile& operator=(const MetricsTextfile&) = delete;

  const std::string& path() const { return path_; }
  // Writes the file now.
  Result<void> write();

 private:
  MetricsTextfile(std::shared_ptr<ShardCacheHierarchy> cache, std::string path, std::chrono::milliseconds interval);
  void run();
  // write(), with one WARNING per run of failures.
  void write_or_warn();
  std::shared_ptr<ShardCacheHierarchy> cache_;
  std::string path_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable stop_changed_;
  bool stopping_ = false;  // guarded by mu_
  bool warned_ = false;    // guarded by write_mu_: the last write failed and was warned about
  std::mutex write_mu_;    // one write at a time
  std::thread thread_;
};

}  // namespace datavo
