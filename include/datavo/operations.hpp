// The cache's operations as library calls: what `datavo cache info|fetch|put|ls|rm|gc|verify|check|stats` does,
// each returning a typed report that a front end presents (the CLI as text or as the JSON of docs/cli.md; the
// Python SDK as objects). `datavo warm` is in warm.hpp, `datavo demo` in demo.hpp.
//
// Reports and failures: an operation that cannot start (a bad argument, a config that does not load, a download
// that fails) returns an Error. One that ran returns its report, also when part of it failed: then `error` holds
// the one Error that sums up what did not work (a front end's failure: exit 1 in the CLI) and the rest of the report
// says what was done. What failed on a single tier is in the report as well (`TierError`), so that a front end can
// show each one.
//
// Stopping: ls, check, gc, verify and rm take a caller's `stop` flag (Python sets it on KeyboardInterrupt; nullptr:
// none), and the CLI's SIGINT/SIGTERM (util/cancel.hpp) stops them too. A stopped operation ends between objects,
// undoes what it began (a check's probe object is deleted), and returns its report with `error` cancelled.
//
// Thread safety: an operation may run alongside reads and other operations, in this process and others (the tiers
// are safe for that). Reports are plain values.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datavo/config.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/fetcher.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/result.hpp"
#include "datavo/tier.hpp"
#include "datavo/transport.hpp"
#include "datavo/units.hpp"

namespace datavo {

// ---- The cache a command works on --------------------------------------------------------------------------------

struct CacheSessionOptions {
  std::optional<std::string> config_path;  // nullopt: the resolution order of config.hpp
  // Whose entries to work on. nullopt: the instance of $DATAVO_SERVER, as warm and read key it
  // (OriginClient::server_instance: asked once per server, then remembered), else "local".
  std::optional<std::string> instance;
};

struct CacheSession {
  CacheConfig config;
  std::shared_ptr<ShardCacheHierarchy> cache;
  Instance instance = Instance::local();
};

// Resolves the config, builds its hierarchy and settles the instance. Errors: config (naming file:line),
// invalid_argument for a bad instance name.
Result<CacheSession> open_cache_session(const CacheSessionOptions& options);

// Waits (up to 10 minutes: a multi-GiB multipart upload on a slow link) for the background uploads to the remote
// tiers of `cache`, so that a command can report their outcome; what is still running then counts as pending.
// nullopt when the hierarchy has no remote tier.
std::optional<UploadSummary> wait_for_uploads(ShardCacheHierarchy& cache);

// A tier an operation could not complete on (the others were still done).
struct TierError {
  std::string tier;
  Error error;
};

// ---- info --------------------------------------------------------------------------------------------------------

struct TierDescription {
  TierInfo info;
  // The lock mechanism of a folder tier whose directory exists; nullopt for other tiers and before the directory is
  // made (probing it creates .locks/, and a tier is not created just to be described).
  std::optional<LockMechanism> lock_mechanism;
  std::vector<TierSetting> settings;  // every effective setting and where it came from (empty without a config)
};

struct CacheInfoReport {
  std::string config_path;  // empty: the built-in default
  ConfigSource config_source = ConfigSource::builtin_default;
  std::vector<SkippedCandidate> skipped;
  std::vector<std::string> warnings;
  std::string instance;
  std::vector<TierDescription> tiers;  // fastest first
};

CacheInfoReport cache_info(const CacheSession& session);

// ---- fetch, put --------------------------------------------------------------------------------------------------

// A shard got through the hierarchy, and what went up to the remote tiers before the call returned.
struct CacheInstallReport {
  ContentHash hash;
  FetchResult result;
  std::optional<UploadSummary> uploads;  // nullopt without a remote tier
};

struct CacheFetchRequest {
  ShardKey key;
  std::string url;  // http(s):// or file://
  Expectation expected;
  std::optional<std::string> bearer_token;  // nullopt: $DATAVO_TOKEN (unset or empty: none)
  TransportOptions transport;               // its stall_timeout is replaced by $DATAVO_STALL_TIMEOUT when set
};

// get_or_fetch of `key`, downloading `url` on a miss (with a SHA-256 expected, a download a killed process left
// half-done is continued), then wait_for_uploads().
Result<CacheInstallReport> cache_fetch(ShardCacheHierarchy& cache, const CacheFetchRequest& request);

// Appends the whole content of the local file `path` to `sink` (for a fetcher whose tool downloads to a path);
// returns how many bytes. Errors name the path (not_found, io, ...); cancelled when a cancellation is requested
// meanwhile (the process-wide flag of the CLI's signal handling).
Result<Bytes> append_file(ByteSink& sink, const std::string& path);

// get_or_fetch of `key` from the local file `path` (installed on a miss), then wait_for_uploads(). When `key` was
// cached already (not installed by this call), backfill: every writable remote tier that misses it is made to hold
// it, uploaded from the local copy (ShardCacheHierarchy::backfill; its outcomes count in `uploads`). The file is
// opened first: one that cannot be read is an Error even when `key` is cached.
Result<CacheInstallReport> cache_put(ShardCacheHierarchy& cache, const ShardKey& key, const std::string& path);

// ---- ls ----------------------------------------------------------------------------------------------------------

// What warm, read or a SampleStream recorded a content hash to be (the shard index of the manifest cache).
struct RecordedShard {
  std::string dataset;
  std::string split;
  std::uint64_t revision = 0;
  std::uint64_t shard_index = 0;
  std::vector<std::string> keys;
};

struct CacheEntry {
  std::string tier;
  EntryInfo entry;
  std::optional<RecordedShard> shard;  // nullopt when nothing recorded it (e.g. `cache put`)
};

struct CacheLsRequest {
  std::optional<Instance> instance;  // whose entries; nullopt: every instance's
  // Where the shard records are: nullopt, the manifest cache of origin_client.hpp.
  std::optional<std::string> manifest_cache_dir;
  // A caller's stop (see the top of this file): the listing ends within its current request, and the report holds
  // the tiers listed before it. Not owned; nullptr: none.
  const std::atomic<bool>* stop = nullptr;
};

// What one tier holds of a listing: a copy in a local tier and one in a bucket are two copies, counted apart.
struct TierLsTotal {
  std::string tier;
  std::uint64_t entries = 0;
  Bytes size;
  bool listed = true;  // false: the tier could not be listed (see failures); entries and size are 0
};

struct CacheLsReport {
  std::optional<std::string> instance;  // nullopt: every instance
  std::vector<CacheEntry> entries;      // tier by tier, fastest first, each in the order its list() gives
  std::vector<TierLsTotal> tiers;       // one per tier, fastest first
  Bytes size;                           // every copy in every tier: an entry two tiers hold counts twice
  std::vector<TierError> failures;      // tiers that could not be listed
  std::optional<Error> error;           // the first of them
};

CacheLsReport cache_ls(ShardCacheHierarchy& cache, const CacheLsRequest& request);

// ---- rm ----------------------------------------------------------------------------------------------------------

// Which tiers `cache rm` removes from. Read-only tiers are never touched.
enum class RmScope {
  this_machine,  // the writable tiers only this machine reaches (TierReach::this_machine): the default
  named,         // exactly the tiers named in CacheRmRequest::tiers, shared or not
  every_tier,    // every writable tier, shared ones included
};

struct CacheRmRequest {
  Instance instance = Instance::local();
  std::vector<ContentHash> hashes;
  // Also every entry recorded (see RecordedShard) of "<dataset>/<split>", or of every split of "<dataset>".
  std::optional<std::string> dataset;
  std::optional<std::string> manifest_cache_dir;  // as in CacheLsRequest
  RmScope scope = RmScope::this_machine;
  std::vector<std::string> tiers;  // with RmScope::named: tier names, each a writable tier of the hierarchy
  // A caller's stop (see the top of this file): the removal ends before its next entry. Not owned; nullptr: none.
  const std::atomic<bool>* stop = nullptr;
};

// Why `cache rm` touches a tier or leaves it alone.
enum class RmTierChoice {
  removes,    // in the scope
  shared,     // left alone: a shared tier outside the default scope (name it, or ask for every tier)
  not_named,  // left alone: RmScope::named did not name it
  read_only,  // left alone: never written
};

// One tier of the hierarchy, as a removal sees it (fastest first).
struct RmTier {
  std::string tier;
  std::string type;
  std::string location;
  TierReach reach = TierReach::this_machine;
  RmTierChoice choice = RmTierChoice::removes;
};

// How a request's scope applies to each tier of `cache`, before anything is removed: a front end shows it, and
// asks before a shared tier is touched. invalid_argument naming the tier (and the tiers there are) when
// RmScope::named names no tier of the hierarchy or a read-only one, or names none at all.
Result<std::vector<RmTier>> cache_rm_tiers(const ShardCacheHierarchy& cache, const CacheRmRequest& request);

// How an entry came to be removed: named by its hash, or recorded as part of the dataset.
enum class RmReason { named, of_dataset };

struct RemovedEntry {
  ContentHash hash;
  RmReason reason = RmReason::named;
  std::vector<std::string> removed_from;  // the tiers in scope that held it
  std::vector<TierError> failures;        // the tiers in scope that could not remove it
};

struct CacheRmReport {
  std::vector<RmTier> tiers;  // every tier, and whether the removal touched it (cache_rm_tiers)
  // Every named entry, then each entry of the dataset that some tier held or failed to remove (one recorded once
  // and evicted since is no entry).
  std::vector<RemovedEntry> entries;
  std::uint64_t removed = 0;     // entries removed from at least one tier
  std::uint64_t not_cached = 0;  // named entries no tier in scope held
  // A tier failed, a named entry is not cached, or the dataset has no cached entry: nothing else to remove is no
  // success (not_found), so that a typo in a hash is not mistaken for a removal. Its message names the shared tiers
  // left alone, where the entry may still be.
  std::optional<Error> error;
};

// Removes from the tiers of request.scope (by default the writable tiers only this machine reaches; never a shared
// one unless asked). The library never asks for confirmation: that is a front end's. invalid_argument when neither
// hashes nor a dataset are given, the dataset name is malformed, or the scope is bad (cache_rm_tiers); nothing is
// removed then.
Result<CacheRmReport> cache_rm(ShardCacheHierarchy& cache, const CacheRmRequest& request);

// ---- gc ----------------------------------------------------------------------------------------------------------

// What gc does with a tier.
enum class GcPolicy {
  evict,      // a writable folder tier: LRU down to max_bytes, max_age, leftover staging and lock files swept
  expire,     // a writable remote tier with max_age: the entries last modified longer ago are deleted
  lifecycle,  // a writable remote tier without max_age: nothing; its bucket's lifecycle rules reclaim space
  read_only,  // a read-only tier: never written to
};
const char* to_string(GcPolicy policy);

struct TierGcReport {
  std::string tier;
  std::string type;  // Tier::type()
  GcPolicy policy = GcPolicy::evict;
  std::optional<Seconds> max_age;
  // evict: what the folder tier's gc did. expire: entries_evicted == expired (the entries deleted, or that a dry
  // run would delete), bytes_freed, and used_after == entries_bytes_after, the bytes of the entries left (of every
  // instance under the tier's prefix). lifecycle and read_only: zeros.
  EvictionReport eviction;
  // A writable remote tier (expire and lifecycle): the leases and check probes that killed processes left, found
  // and (unless a dry run) deleted. Zeros for other tiers, whose gc sweeps their own leftovers (eviction).
  LeftoverReport leftovers;
};

struct CacheGcReport {
  DryRun dry_run = DryRun::no;
  std::vector<TierGcReport> tiers;  // every tier that answered, fastest first
  std::vector<TierError> failures;  // the tiers that could not be listed, and the entries that could not be deleted
  std::optional<Error> error;       // io when a tier failed
};

// Evicts each writable folder tier to its budget and max_age and sweeps leftover staging and lock files; deletes the
// entries of each writable remote tier with a max_age that were last modified longer ago than it (by the service's
// Last-Modified against this machine's clock). Size limits of a remote tier are left to its bucket's lifecycle
// rules (docs/config.md). A remote entry that another machine reads meanwhile is fetched again: gc trades that for
// the space. Each writable remote tier is also swept of what killed processes left in it (LeftoverSweeper: expired
// leases, stale check probes). A stop (above) ends the pass between objects.
CacheGcReport cache_gc(ShardCacheHierarchy& cache, DryRun dry_run, const std::atomic<bool>* stop = nullptr);

// ---- verify ------------------------------------------------------------------------------------------------------

struct TierVerifyReport {
  std::string tier;
  VerifyReport verify;
};

// A cloud tier whose objects verify checked (ObjectVerifier), or failed to check.
struct TierObjectVerifyReport {
  std::string tier;
  std::string type;  // "s3", "gcs", "azure_blob"
  bool read_only = false;
  ObjectVerifyReport verify;   // all zero when error is set
  std::optional<Error> error;  // the tier could not be listed or an object not read (unreachable, refused)
};

// A tier that verify does not check, and why (a front end says so rather than skip it without a word).
struct TierNotVerified {
  std::string tier;
  std::string type;
  std::string why;
};

struct CacheVerifyReport {
  Repair repair = Repair::no;
  VerifyDepth depth = VerifyDepth::metadata;
  std::vector<TierVerifyReport> tiers;          // the folder tiers verified, fastest first
  std::vector<TierObjectVerifyReport> objects;  // the cloud tiers, fastest first
  std::vector<TierNotVerified> not_verified;    // the other tiers (the memory double), fastest first
  // Bad entries left in place: Repair::no, a quarantine or delete that failed, or a read-only cloud tier.
  std::uint64_t unrepaired = 0;
  // Cloud tiers' objects whose bytes were not proven (ObjectVerifyReport::metadata_only): VerifyDepth::full
  // downloads them.
  std::uint64_t metadata_only = 0;
  // The error of a folder tier that could not be verified (the tiers after it were not); else remote (or the
  // tier's own code) when a cloud tier could not be checked; else integrity when an entry or object is bad and was
  // not repaired.
  std::optional<Error> error;
};

// Re-hashes the entries of every folder tier against their recorded SHA-256; Repair::yes quarantines bad ones.
// Checks the entry objects of every cloud tier, all instances (ObjectVerifier, datavo/tier.hpp): with
// VerifyDepth::metadata a HEAD each, proven by the service's own SHA-256 where it keeps one (S3), otherwise
// counted as metadata_only; with VerifyDepth::full every object is downloaded and hashed. Repair::yes deletes bad
// objects from writable cloud tiers. A cloud tier that cannot be checked is reported with its error, and the
// other tiers are still checked. Other tiers without a verification are listed in not_verified.
CacheVerifyReport cache_verify(ShardCacheHierarchy& cache, Repair repair, VerifyDepth depth = VerifyDepth::metadata,
                               const std::atomic<bool>* stop = nullptr);

// ---- check -------------------------------------------------------------------------------------------------------

struct TierCheckReport {
  std::string tier;
  std::string type;
  std::string location;
  bool read_only = false;
  bool usable = false;  // readable, and writable unless read-only
  CheckReport check;
};

struct CacheCheckReport {
  std::vector<TierCheckReport> tiers;  // fastest first
  bool ok = false;                     // every tier usable
  std::optional<Error> error;          // remote, saying how many tiers are not
};

// Probes every tier once (Tier::check: a probe object's put, get, conditional put and delete for a cloud tier; write,
// sync and read back for a folder tier).
CacheCheckReport cache_check(ShardCacheHierarchy& cache, const std::atomic<bool>* stop = nullptr);

// ---- stats -------------------------------------------------------------------------------------------------------

enum class ResetStats { no, yes };

struct CacheStatsReport {
  std::vector<TierInfo> tiers;  // fastest first; the counters of every process for folder tiers
};

// With ResetStats::yes the folder tiers' counters are zeroed first; an Error when one cannot be.
Result<CacheStatsReport> cache_stats(ShardCacheHierarchy& cache, ResetStats reset);

}  // namespace datavo
