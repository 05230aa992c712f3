// datavo::warm: fills the cache hierarchy with every shard of a key group (`datavo warm`), and plan_warm(), which
// says what a warm would do without fetching (`datavo warm --dry-run`).
//
// warm() resolves the dataset as SampleStream does (dataset.hpp), then gets every shard through
// ShardCacheHierarchy::get_or_fetch on `jobs` worker threads: a shard a tier holds is a hit (or a promotion into a
// faster tier), any other is fetched from the origin. Each shard's handle is closed as soon as the shard is done, so
// a warm holds at most `jobs` descriptors on shards, and an entry evicted meanwhile frees its space at once. It then
// waits for the background uploads to remote tiers (wait_for_uploads in operations.hpp), and looks every shard up
// again: eviction may have removed shards warmed earlier in the run, and what the report gives is where they are
// now.
//
// Backfill: then every writable remote tier that misses a shard is made to hold it, uploaded from the local copy
// (ShardCacheHierarchy::backfill: one HEAD-like request per shard and tier, on the `jobs` threads), so that a warm
// after an outage fills the bucket without calling the origin. Each writable remote tier's row then accounts for
// every shard: uploaded, already present, failed or skipped (tier down, too small, no local copy), with the reasons.
//
// A region's share (WarmRequest::share, `datavo warm --share I/N`): the VMs of a region agree who fetches a shard
// through the leases of a shared tier, so while that tier is down each VM would fetch every shard itself. With a
// share, a shard outside this VM's share is not fetched from the origin while the tier that coordinates (the first
// writable remote tier offering leases) cannot be reached: it is deferred. Once every worker is done, warm waits for
// the region: it uploads its own share to the remote tiers as soon as they take it (backfill), and reads each
// deferred shard from a remote tier as soon as the VM whose share it is has uploaded it, polling with backoff, for at
// most RegionShare::wait from the first deferral; what is still missing then is fetched from the origin (a VM of
// the region that never came back must not stop the others). With the tier up, the leases decide as without a share.
//
// Outcome (WarmReport::error): remote when a shard could not be warmed; capacity when the top tier does not hold
// every shard now, and remote when a writable remote tier did not receive every shard (unless AllowPartial::yes:
// then only `partial` says so). A cancellation (util/cancel.hpp: SIGINT in the CLI, or WarmRequest::stop) stops the
// workers; warm() then returns a cancelled Error.
//
// Thread safety: warm() may run alongside other warms and reads, in this process and others (single flight comes
// from the hierarchy). The observer is called from the worker threads, several at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// Whether a warm whose top tier cannot hold every shard succeeds (with WarmReport::partial saying so).
enum class AllowPartial { no, yes };

// One shard of a warm, done.
struct WarmShardOutcome {
  std::size_t position = 0;       // in the manifest
  std::uint64_t shard_index = 0;  // the manifest's index
  struct Served {
    std::string tier;  // the tier the shard is in now
    ServedFrom source = ServedFrom::hit;
    Bytes size;
    std::string found_in{};  // the tier it was found in (FetchResult::found_in): a hit there, also when promoted
  };
  std::optional<Served> served;  // exactly one of served and error
  std::optional<Error> error;
};

// What a front end shows while a warm runs (a progress bar, one line per shard). Every method has an empty default.
class WarmObserver {
 public:
  virtual ~WarmObserver() = default;
  // The manifest is resolved: `shards` shards will be warmed. Called once, before any other call.
  virtual void started(std::size_t shards) { (void)shards; }
  // Bytes arrived from the origin; negative when a download started over. From the worker threads.
  virtual void origin_bytes(std::int64_t delta) { (void)delta; }
  // One shard is done. From the worker threads, not for a shard stopped by a cancellation.
  virtual void shard_done(const WarmShardOutcome& outcome) { (void)outcome; }
  // The workers have finished and `deferred` shards were left to the region's other members (see "A region's
  // share"): warm() now waits for their uploads, for at most `left` more (then it fetches what is still missing from
  // the origin). Called at most once, on warm()'s thread, before any shard_done() for those shards.
  virtual void waiting_for_region(std::size_t deferred, Seconds left) {
    (void)deferred;
    (void)left;
  }
  // Every worker has finished; the uploads are waited for next. Called once, on warm()'s thread.
  virtual void finished() {}
};

// This VM's place in a region (see "A region's share" above): member `index` of `count` VMs. A shard belongs to the
// member whose index is its manifest position modulo `count`, so every VM of a region that warms the same revision
// with the same `count` agrees on the owner without asking anyone.
struct RegionShare {
  std::size_t index = 0;  // < count
  std::size_t count = 1;  // >= 1
  // How long warm waits for the region's other members after its first deferral (then it fetches the rest itself).
  Seconds wait{120};

  // "I/N" (e.g. "3/8", as a job's node rank and node count); invalid_argument naming the text otherwise.
  static Result<RegionShare> parse(std::string_view text);
  bool owns(std::size_t position) const { return position % count == index; }
};

// What a share did in one warm (WarmReport::share).
struct WarmShareReport {
  RegionShare share;
  std::uint64_t deferred = 0;               // shards left to their owner while the coordinating tier was down
  std::uint64_t from_region = 0;            // of those, read from a remote tier once their owner had uploaded them
  std::uint64_t fetched_after_wait = 0;     // of those, fetched from the origin once the wait had run out
  std::chrono::duration<double> waited{0};  // the time spent waiting for the region
};

struct WarmRequest {
  std::string dataset;                    // "<dataset>/<split>"
  std::vector<std::string> keys;          // the key group (any order; de-duplicated)
  std::optional<std::uint64_t> revision;  // nullopt: the latest

  // The cache: `cache` when set, else the hierarchy of `cache_config_path` (resolution order of config.hpp).
  std::shared_ptr<ShardCacheHierarchy> cache;
  std::optional<std::string> cache_config_path;
  // The origin: `client` when set, else one made from `origin` (see OriginClientOptions).
  std::shared_ptr<OriginClient> client;
  OriginClientOptions origin;

  std::size_t jobs = 4;              // shards fetched in parallel; >= 1
  std::optional<RegionShare> share;  // nullopt: every shard is this VM's to fetch (see "A region's share")
  AllowPartial allow_partial = AllowPartial::no;
  WarmObserver* observer = nullptr;  // not owned; nullptr: none
  // A file kept holding the cache's metrics in the Prometheus text format (datavo/metrics.hpp's MetricsTextfile):
  // written when the warm starts (a path that cannot be written fails the warm then), rewritten every few seconds,
  // and once more after the uploads were waited for. nullopt: none.
  std::optional<std::string> metrics_textfile;
  // Stops this warm as the process-wide cancellation does (no shard is started, downloads in progress fail at their
  // next chunk, a wait for another process's shard lock ends within 50 ms, warm() returns a cancelled Error), for a
  // front end without one: the Python SDK sets it on
  // KeyboardInterrupt. Not owned; nullptr: only the process-wide cancellation stops the warm.
  const std::atomic<bool>* stop = nullptr;
};

// What became of the shards of a warm in one writable remote tier: uploaded + already_present + failed + skipped is
// the number of shards. `uploaded` counts the uploads of this warm into the tier, during it and by the backfill
// (ShardCacheHierarchy::uploads_into before and after: a hierarchy that other threads upload through meanwhile blurs it
// into already_present).
struct WarmTierUploads {
  std::uint64_t uploaded = 0;
  std::uint64_t already_present = 0;          // the tier held it (found there, or stored by another machine)
  std::uint64_t failed = 0;                   // its lookup or upload failed
  std::uint64_t skipped = 0;                  // not tried: tier down (breaker open), too small, no local copy
  std::optional<std::string> failed_reason;   // the last failure's message
  std::optional<std::string> skipped_reason;  // the last skip's reason
};

struct WarmTierReport {
  std::string tier;
  std::uint64_t hits = 0;           // shards this warm found in the tier
  std::uint64_t promoted_into = 0;  // shards this warm copied into the tier from a slower one
  std::uint64_t cached = 0;         // shards whose fastest copy is in this tier once the warm is done
  // Shards the tier holds once the warm is done, whichever tier is faster ("holds N of M"): a folder tier as a hit
  // would check it, a writable remote tier from the backfill. nullopt for a read-only remote tier (asking it would
  // cost a request per shard).
  std::optional<std::uint64_t> held;
  std::optional<WarmTierUploads> uploads;  // set for a writable remote tier
};

struct WarmShardFailure {
  std::uint64_t shard_index = 0;
  Error error;
};

struct WarmReport {
  std::string dataset;  // "<dataset>/<split>"
  std::uint64_t revision = 0;
  std::vector<std::string> keys;  // normalized
  std::uint64_t shards = 0;
  std::uint64_t failed = 0;
  Bytes size;                       // of the shards warmed
  std::uint64_t origin_shards = 0;  // fetched from the origin
  Bytes origin_size;
  std::vector<WarmTierReport> tiers;  // fastest first
  std::uint64_t not_cached = 0;       // shards no tier holds once the warm is done
  std::chrono::duration<double> elapsed{0};
  // nullopt without a remote tier; else, over the writable remote tiers: `uploaded`, `failed` and `skipped` the sums
  // of the tiers' rows, `already_present` the uploads of this warm that found the object stored by another machine
  // (a conditional create refused), `pending` the uploads still running when the warm stopped waiting (10 min).
  std::optional<UploadSummary> uploads;
  std::vector<WarmShardFailure> failures;  // manifest order
  std::optional<WarmShareReport> share;    // set when the request had a share
  // Set when the top tier does not hold every shard: "only 3 of 12 shards are cached in the top tier 'local' after
  // the warm (max_bytes 1.0 MiB): 9 remain cached in tier 'scratch', 0 are cached nowhere"; and when a writable
  // remote tier does not: "tier 'region' holds 2 of the 8 shards: 6 skipped (tier down: ...)" (joined by "; ").
  std::optional<std::string> partial;
  std::optional<Error> error;  // see Outcome at the top of this file
};

// See the top of this file. Errors (no report): a bad request (dataset.hpp's errors, jobs 0), the cache or the
// origin client that cannot be made, a share whose index is not below its count, a cancellation.
Result<WarmReport> warm(const WarmRequest& request);

// One shard of a plan: the tier that would serve it (looked up without reading it) and, where that tier knows it
// without a request, its size.
struct PlannedShard {
  std::uint64_t shard_index = 0;
  ContentHash content_hash;
  std::size_t samples = 0;
  std::optional<std::string> tier;  // nullopt: to be fetched from the origin
  std::optional<Bytes> size;        // known for shards in a folder tier
};

struct WarmPlan {
  std::string dataset;
  std::uint64_t revision = 0;
  std::vector<std::string> keys;
  std::vector<PlannedShard> shards;  // manifest order
  std::uint64_t cached_shards = 0;
  Bytes cached_size;
  std::uint64_t shards_to_fetch = 0;  // their sizes are unknown: the manifest carries none
};

// What warm(request) would do, fetching nothing: the manifest request only. A tier that cannot tell whether it
// holds a shard is logged (WARNING) and the shard counted as to fetch. `jobs`, `allow_partial` and `observer` are
// not used.
Result<WarmPlan> plan_warm(const WarmRequest& request);

}  // namespace datavo
