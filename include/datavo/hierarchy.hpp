// ShardCacheHierarchy: an ordered list of tiers, fastest first, read through by content hash.
//
// get_or_fetch(key, fetcher) follows the spec's rules (docs/hierarchy.md):
//   - walk the tiers fastest first; the first tier holding the shard serves it;
//   - a hit on a slower tier is promoted: copied into every faster tier that can hold it;
//   - a hit on a remote tier (one that is not a LocalTier) is first materialized: downloaded through a staging
//     transaction of the topmost writable folder tier above it (the next one when that one fails), then installed
//     into the faster tiers; with no folder tier able to take it the call fails (capacity). A remote lookup is one
//     request: the tier's read_into() downloads on a hit and answers false on a miss. A remote hit and an origin
//     fetch land through the same steps (stage, verify, install; a failing landing tier is skipped for the next);
//   - a full miss calls the fetcher once, verifies the bytes, and installs them into every tier that can hold
//     them (a tier too small is skipped with a WARNING); with no tier accepting the call fails (capacity);
//   - the returned handle is on the topmost installed copy; the fetcher is never called on a hit.
// Beyond the spec:
//   - Single flight: concurrent calls for one key, from threads or processes on this machine, call the fetcher
//     once; the others wait on a per-shard lock in the topmost writable folder tier, then re-check the folder
//     tiers (not the remote ones) and read the installed file. If the holder dies a waiter takes over, and
//     continues the download the holder left behind (LocalTier::begin with Resume::partial) instead of starting it
//     over; a continued download that does not verify is fetched again from its first byte.
//   - Self-healing: a damaged entry (its size or, with `verify: full|sampled`, its bytes differ from what was
//     recorded) is a miss in its tier, so the read falls through and the good copy is promoted back.
//   - Degrading: a tier that fails (I/O error, permission, disk full, remote error) is treated as a miss or a
//     skip with a WARNING and counted in its `errors`; it never fails a read that another tier can serve. After
//     3 failures in a row a tier is skipped for a cooldown (30 s, doubling up to 10 min): a circuit breaker that
//     logs one WARNING when it opens and one when it closes. When no folder tier can stage a fetched shard, the
//     call's Error names each tier's cause (and its code and sys_errno are the last one's) instead of a WARNING
//     per tier, so that a failure is reported once.
//   - Integrity: bytes whose size or SHA-256 differ from what the fetcher (or the hints, or a remote tier's
//     object metadata) expect are never installed. A remote object that does not match its metadata, or what the
//     caller expects (get_or_fetch's `expected`), is deleted from its tier (when writable) with a WARNING, and the
//     read falls through to the next tier or the origin.
//   - Uploads to remote tiers run after the local install has committed, in a bounded background queue, so the
//     reader gets its local path without waiting (upload: sync waits). flush_uploads() and the destructor wait
//     for them, with a bound. A failed upload is a WARNING and an `upload_failures` count, not a failed read.
//   - Backfill: backfill(key) makes every writable remote tier that misses a shard hold it, uploading from the local
//     copy. `warm` and `cache put` call it; the read path does not (a local hit costs no request to a remote tier).
//   - Cross-VM single flight: on a full miss, before calling the fetcher, the hierarchy takes a lease in the
//     first writable remote tier that offers one (Tier::coordination()). A VM that finds a live lease does not
//     call the origin: it polls the tier for the object, with backoff, and materializes it once it appears; it
//     takes over when the lease expires or is released without the object; a cancellation (util/cancel.hpp) ends
//     the wait at once with `cancelled`. The holder's lease is released after its upload.
//
// Thread safety: a hierarchy holds no per-dataset state; one instance may be shared by any number of threads
// and reused across datasets.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datavo/config.hpp"
#include "datavo/fetcher.hpp"
#include "datavo/tier.hpp"

namespace datavo {

enum class ServedFrom { hit, promoted, fetched };
const char* to_string(ServedFrom source);

struct FetchResult {
  ShardHandle handle;     // open on the topmost installed copy
  std::string tier_name;  // the tier that handle is in
  std::size_t tier_index = 0;
  ServedFrom source = ServedFrom::hit;
  // The tier the shard was found in: tier_name for a hit, the slower tier it was promoted (or materialized) from,
  // also after waiting on another machine's lease; empty when it was fetched from the origin.
  std::string found_in{};
};

// Watches an origin fetch land, so that a reader can read the shard's verified prefix out of the staging file before
// it is installed (docs/hierarchy.md, "Reading while fetching"). Its calls come one at a time:
//   - staging(): a staging file was begun and the fetcher is about to fill it. `staged` reads that file (read only,
//     its own descriptor); it grows as bytes arrive and may be removed (a failed landing), which never invalidates
//     a mapping of it. Every verified() call that follows is about this file, until the next staging().
//   - verified(): the first `prefix` bytes of that file, of a shard of `total` bytes, match the ticket's chunk
//     digests (the fetcher's sink reported them, ByteSink::verified_prefix). They never change again: a staging
//     file is never truncated or rewritten in place (ShardTransaction::restart() begins a new one), and the
//     hierarchy refuses to restart a download once a prefix of it was reported to the observer; such a fetch fails
//     instead.
// While the call waits for the single-flight lock, and the holder is another process of this host, the observer is
// told of that process's landing the same way (what its lock publishes, ShardLock), from a thread of the hierarchy;
// then of this call's own landing, if the holder did not install the shard. A fetcher without chunk digests never
// reports a prefix: the reader then waits for get_or_fetch as before. Hits and remote tiers are not observed. The
// observer must not call back into the hierarchy.
class LandingObserver {
 public:
  virtual ~LandingObserver() = default;
  virtual void staging(ShardHandle staged) = 0;
  virtual void verified(Bytes prefix, Bytes total) = 0;
};

// Uploads to remote tiers since the hierarchy was made (see ShardCacheHierarchy::flush_uploads).
struct UploadSummary {
  std::uint64_t uploaded = 0;
  std::uint64_t already_present = 0;  // another VM had stored the same bytes: a success
  std::uint64_t failed = 0;
  std::uint64_t skipped = 0;  // not tried by backfill(): the tier was down (breaker open), too small, no local copy
  std::uint64_t pending = 0;  // still queued or running when the summary was taken
};

// Whose counters a TierInfo holds.
enum class StatsScope {
  every_process,  // a folder tier's: every process that used it, persisted in the tier
  this_machine,   // a remote tier's: every process of this machine, kept in the top writable folder tier's stats
  this_process,   // a remote tier's when no writable folder tier can keep them
};
// "every_process", "this_machine", "this_process".
const char* to_string(StatsScope scope);

// What backfill() found or did in one writable remote tier.
enum class BackfillOutcome {
  already_present,  // the tier held the shard
  uploaded,         // the tier missed it and now holds it
  failed,           // the lookup or the upload failed (the tier is degraded, as on any failure)
  skipped,          // not tried: the tier is down (its breaker is open), too small, or there is no local copy
};
const char* to_string(BackfillOutcome outcome);

struct TierBackfill {
  std::size_t tier_index = 0;
  std::string tier;
  BackfillOutcome outcome = BackfillOutcome::already_present;
  std::string reason;  // failed, skipped: why ("tier down: ...", the error's message); empty otherwise
};

struct TierInfo {
  std::string name;
  std::string type;
  std::string location;
  std::optional<Bytes> max_bytes;
  bool read_only = false;
  std::optional<TierUsage> usage;  // nullopt when the tier could not be measured
  TierStats stats;                 // the counters of `scope`; those not in `kept` are zero
  TierStatSet kept;                // the counters this tier keeps (Tier::kept_stats)
  StatsScope scope = StatsScope::this_process;
  std::string kept_in;        // this_machine: the folder tier whose stats file keeps them
  bool breaker_open = false;  // this process's circuit breaker of the tier is open (the tier is being skipped)
};

class ShardCacheHierarchy {
 public:
  // Returns config (with the reason) when `tiers` is empty, holds no folder tier or holds two tiers of one name
  // (as the shards.yaml loader refuses them), and invalid_argument when one tier object appears twice.
  static Result<std::shared_ptr<ShardCacheHierarchy>> create(std::vector<std::shared_ptr<Tier>> tiers);
  ~ShardCacheHierarchy();  // waits (bounded) for background uploads, flushes folder-tier stats

  const std::vector<std::shared_ptr<Tier>>& tiers() const { return tiers_; }

  // See the contract at the top of this file. `expected` is what the caller knows before fetching (it lets the
  // hierarchy skip tiers too small for the shard before any byte moves); the fetcher's answer is merged in.
  // `observer` (may be nullptr; borrowed for the call) watches an origin fetch land (LandingObserver).
  Result<FetchResult> get_or_fetch(const ShardKey& key, const Fetcher& fetcher, const Expectation& expected = {},
                                   LandingObserver* observer = nullptr);
  // Looks the key up without fetching: the same walk and promotion, but a miss is std::nullopt.
  Result<std::optional<FetchResult>> get(const ShardKey& key);

  // A streamed read (SampleStream's ReadMode::streamed): copies the entry for `key` in tier `tier_index` into `sink`
  // without promoting it anywhere, and returns what the tier recorded about its bytes (Tier::read_into); checking
  // them is the sink's and the caller's. A hit counts in the tier's hits and bytes_served, a miss (nullopt) in its
  // misses. A failure is returned, after the tier is dealt with as a lookup would: an integrity Error (the sink found
  // bytes that do not match) deletes the object from a writable tier (drop_corrupt: its `quarantined`); any other
  // failure but a cancellation degrades the tier (its `errors`, its breaker, a WARNING while the breaker is closed),
  // and a success closes its breaker. It does not ask the breaker first: the caller found the tier with
  // locate(key, LocateMode::read), which does, and which leaves the verdict on a tier that holds the key to this
  // read. REQUIRES: tier_index < tiers().size().
  Result<std::optional<Expectation>> read_from(std::size_t tier_index, const ShardKey& key, ByteSink& sink);

  struct Location {
    std::size_t tier_index = 0;
    std::string tier_name;
    std::optional<Bytes> size;  // known for folder tiers
  };
  // How locate() treats a tier that fails:
  //   inspect: every tier is asked, and nothing is counted; a failure is remembered (see locate()).
  //   read:    as a read would (a streamed read asks so): a tier whose breaker is open is not asked, and a failure
  //            degrades the tier (its `errors`, its breaker, a WARNING while the breaker is closed) and counts as
  //            that tier's miss.
  enum class LocateMode { inspect, read };
  // The fastest tier that holds `key`, without reading, promoting or counting a hit or a miss: folder tiers are
  // checked as a hit would check them (the recorded size), remote tiers with one HEAD-like request. nullopt when no
  // tier holds it; an Error when none holds it and one failed (LocateMode::inspect), so a miss cannot be told.
  Result<std::optional<Location>> locate(const ShardKey& key, LocateMode mode = LocateMode::inspect);

  // Order hints: places `key` in the LRU order of every writable local tier that holds it, as if it had last been
  // read at `as_if_read_at` (LocalTier::place; SampleStream derives the time from when the shard is next needed,
  // docs/hierarchy.md "Order hints"). Advisory: a tier that cannot place it leaves it where it is, and an unexpected
  // failure only counts in the tier's `errors`. Returns how many tiers placed it. No network I/O.
  std::size_t place(const ShardKey& key, std::chrono::system_clock::time_point as_if_read_at);
  // What the topmost writable local tier can hold: its max_bytes, else its filesystem's free space; nullopt when
  // there is none or it is unknown. Sizes a reader's prefetch budget.
  std::optional<Bytes> landing_capacity() const;

  // Backfill: makes every writable remote tier that misses `key` hold it, uploading from the fastest local copy on
  // the caller's thread (whatever the tier's upload mode). Per tier, one HEAD-like request, and the upload when it
  // misses. A tier whose breaker is open is skipped (no request), but a shard that this hierarchy uploaded to it
  // counts as held. One row per writable remote tier, fastest first (empty without one). A failure degrades the tier as
  // a read would (a WARNING, its `errors`, its breaker); every row counts in flush_uploads()'s summary. The only Error
  // is a cancellation (util/cancel.hpp).
  Result<std::vector<TierBackfill>> backfill(const ShardKey& key);

  // Usage and counters of every tier, fastest first (cf. zarr's cache_info, typed). Does no network I/O: the
  // usage of a remote tier is not measured here (listing a bucket costs requests). A remote tier's counters are
  // kept per machine by the topmost writable folder tier (LocalTier::keep_stats_of), flushed with its own.
  // MeasureUsage::no leaves `usage` unset for every tier (measuring a folder tier scans its directories).
  enum class MeasureUsage { yes, no };
  std::vector<TierInfo> cache_info(MeasureUsage measure = MeasureUsage::yes);

  // Waits for the background uploads queued so far, at most `bound`; the destructor does the same with
  // k_destructor_upload_bound. Returns what happened to every upload since the hierarchy was made.
  UploadSummary flush_uploads(Milliseconds bound);
  // The uploads into `tier` that stored its object since the hierarchy was made (queued, sync and backfill), never
  // reset: unlike the tier's `uploads` counter, which flush_stats() hands to the stats file, it tells an
  // operation's own uploads apart (warm takes it before and after). Thread-safe.
  std::uint64_t uploads_into(const Tier& tier) const;
  static constexpr Milliseconds k_destructor_upload_bound{5 * 60 * 1000};
  // Persists this process's counters in each writable folder tier.
  void flush_stats();

  struct Impl;  // opaque: the breakers and the upload queue (src/core/walk.hpp)

 private:
  explicit ShardCacheHierarchy(std::vector<std::shared_ptr<Tier>> tiers);
  // flush_stats() at most every few seconds; cheap enough for the hit path.
  void maybe_flush_stats();
  void flush_local_stats(LockWait wait);
  std::vector<std::shared_ptr<Tier>> tiers_;
  std::unique_ptr<Impl> impl_;
};

// Builds every tier of `config` through the tier registry (tier_registry.hpp); a tier that this build cannot provide
// is skipped with a WARNING, any other that cannot be built fails the call (config, naming the file).
Result<std::shared_ptr<ShardCacheHierarchy>> build_hierarchy(const CacheConfig& config);
// resolve_config() + build_hierarchy(): the hierarchy a read would use.
Result<std::shared_ptr<ShardCacheHierarchy>> get_default_shard_cache(
    const std::optional<std::string>& config_path = std::nullopt);

}  // namespace datavo
