// The tier interface that every cache tier implements, the handle through which readers hold a shard, and the
// one capability that only local tiers add (LocalTier).
//
// A tier holds shards by ShardKey. Contract shared by every tier:
//   - A miss is a value (false / std::nullopt), never an Error.
//   - A failure is an Error; no exception escapes a tier method.
//   - Installs are all-or-nothing: a reader never sees a partial entry under its key.
//   - Every method is safe to call from several threads at once.
//
// Two interfaces, kept apart on purpose:
//   - Tier: what every tier does, remote or local: contains, read_into (a lookup that copies the bytes out),
//     install_copy, remove, usage, list, check. A remote tier (S3, GCS, Azure Blob, the in-memory double)
//     implements only this.
//   - LocalTier: a Tier whose entries are local files (folder tiers), reached through Tier::as_local(). It adds
//     what the hierarchy needs to land bytes in a tier and hand readers a file: direct reads (open), single flight
//     (lock_shard) and staging transactions (begin: a ShardTransaction that commits by rename and aborts on
//     destruction, as CernVM-FS's cache manager offers StartTxn / CommitTxn / AbortTxn). None of this means anything
//     for a bucket, so it stays off the base interface: a remote tier's hits are materialized into a LocalTier
//     through its transactions, never read in place.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/access.hpp"
#include "datavo/byte_sink.hpp"
#include "datavo/chunk_digests.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/fetcher.hpp"
#include "datavo/lease.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

class FolderTier;
class LocalTier;

// An open, read-only local shard file. Owns its file descriptor and closes it on destruction. The bytes stay
// readable through fd() after the entry is evicted or removed, so a reader that holds a handle never fails.
// Movable, not copyable. Not thread-safe (use one handle per thread, or synchronise).
class ShardHandle {
 public:
  ShardHandle() = default;
  ShardHandle(int fd, std::string path, Bytes size) : fd_(fd), path_(std::move(path)), size_(size) {}
  ~ShardHandle();
  ShardHandle(ShardHandle&& other) noexcept;
  ShardHandle& operator=(ShardHandle&& other) noexcept;
  ShardHandle(const ShardHandle&) = delete;
  ShardHandle& operator=(const ShardHandle&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // A second handle on the same open file (its own descriptor, F_DUPFD_CLOEXEC): it keeps reading the same bytes
  // whatever happens to this one or to the entry.
  Result<ShardHandle> duplicate() const;
  // The path the entry was opened at. It may no longer exist (evicted); read through fd() instead.
  const std::string& path() const { return path_; }
  Bytes size() const { return size_; }

 private:
  int fd_ = -1;
  std::string path_;
  Bytes size_;
};

// The per-tier counters, each written once here: X(name, type, meaning). TierStats, TierCounters, their
// arithmetic, the persisted .stats.json and the CLI's JSON are all generated from this list.
#define DATAVO_TIER_STATS(X)                                                                      \
  X(hits, std::uint64_t, "lookups this tier served")                                              \
  X(misses, std::uint64_t, "lookups this tier could not serve")                                   \
  X(promotions, std::uint64_t, "entries copied into this tier from a slower tier")                \
  X(installs, std::uint64_t, "entries installed into this tier after an origin fetch")            \
  X(capacity_skips, std::uint64_t, "installs skipped because the shard is larger than max_bytes") \
  X(evictions, std::uint64_t, "entries removed by LRU, max_age or rm")                            \
  X(quarantined, std::uint64_t, "damaged entries moved aside on a hit or by verify")              \
  X(errors, std::uint64_t, "failures that were degraded to a miss or a skip")                     \
  X(uploads, std::uint64_t, "background uploads that completed (remote tiers)")                   \
  X(upload_failures, std::uint64_t, "background uploads that failed (remote tiers)")              \
  X(uploads_present, std::uint64_t, "uploads that found the object there already (remote tiers)") \
  X(upload_skips, std::uint64_t, "uploads not tried: the tier's breaker was open (remote tiers)") \
  X(lease_waits, std::uint64_t, "fetches that waited for another VM's lease (remote tiers)")      \
  X(hedges_sent, std::uint64_t, "second requests sent for a slow ranged GET (remote tiers)")      \
  X(hedges_won, std::uint64_t, "hedged requests that answered before the first (remote tiers)")   \
  X(bytes_served, Bytes, "bytes handed to readers from this tier")                                \
  X(bytes_installed, Bytes, "bytes of promotions and installs")

namespace detail {
inline std::uint64_t stat_count(std::uint64_t value) { return value; }
inline std::uint64_t stat_count(Bytes value) { return value.count(); }
template <typename T>
T stat_from_count(std::uint64_t count) {
  return T{count};
}
}  // namespace detail

// One counter of DATAVO_TIER_STATS, by name.
enum class TierStat {
#define DATAVO_TIER_STATS_ENUM(name, type, meaning) name,
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_ENUM)
#undef DATAVO_TIER_STATS_ENUM
};

// A set of counters: the ones a tier can keep (Tier::kept_stats). A counter a tier cannot keep (a bucket does not
// know what its lifecycle rules evict) is left out of what is shown for it rather than shown as zero.
class TierStatSet {
 public:
  constexpr TierStatSet() = default;
  static constexpr TierStatSet all() { return TierStatSet(~std::uint64_t{0}); }
  constexpr TierStatSet with(TierStat stat) const { return TierStatSet(bits_ | bit(stat)); }
  constexpr TierStatSet without(TierStat stat) const { return TierStatSet(bits_ & ~bit(stat)); }
  constexpr bool contains(TierStat stat) const { return (bits_ & bit(stat)) != 0; }
  friend constexpr bool operator==(TierStatSet, TierStatSet) = default;

 private:
  constexpr explicit TierStatSet(std::uint64_t bits) : bits_(bits) {}
  static constexpr std::uint64_t bit(TierStat stat) { return std::uint64_t{1} << static_cast<unsigned>(stat); }
  std::uint64_t bits_ = 0;
};

// Cumulative per-tier counters (cf. zarr's cache_info, with a typed return).
struct TierStats {
#define DATAVO_TIER_STATS_MEMBER(name, type, meaning) type name{};
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_MEMBER)
#undef DATAVO_TIER_STATS_MEMBER

  TierStats& operator+=(const TierStats& other);
  bool empty() const;  // every counter is zero
  double hit_rate() const { return hits + misses == 0 ? 0.0 : double(hits) / double(hits + misses); }
  // Calls f(name, value as a count) for every counter, in the order above.
  template <typename F>
  void for_each(F&& f) const {
#define DATAVO_TIER_STATS_VISIT(name, type, meaning) f(#name, detail::stat_count(name));
    DATAVO_TIER_STATS(DATAVO_TIER_STATS_VISIT)
#undef DATAVO_TIER_STATS_VISIT
  }
  // Calls f(stat, name, value as a count) for every counter, in the order above.
  template <typename F>
  void for_each_stat(F&& f) const {
#define DATAVO_TIER_STATS_VISIT_STAT(name, type, meaning) f(TierStat::name, #name, detail::stat_count(name));
    DATAVO_TIER_STATS(DATAVO_TIER_STATS_VISIT_STAT)
#undef DATAVO_TIER_STATS_VISIT_STAT
  }
  // Sets the counter called `name` (false when there is none).
  bool set(std::string_view name, std::uint64_t count);
};

// Thread-safe counters behind TierStats.
struct TierCounters {
#define DATAVO_TIER_STATS_ATOMIC(name, type, meaning) std::atomic<std::uint64_t> name{0};
  DATAVO_TIER_STATS(DATAVO_TIER_STATS_ATOMIC)
#undef DATAVO_TIER_STATS_ATOMIC
  TierStats snapshot() const;
  // Returns the counts and zeroes them atomically per field.
  TierStats take();
};

struct TierUsage {
  Bytes used;                 // every byte under the tier (all instances, staging and sidecars included)
  std::uint64_t entries = 0;  // committed entries, all instances
};

struct EntryInfo {
  std::string instance;
  ContentHash hash;
  Bytes size;
  std::chrono::system_clock::time_point last_access;  // mtime for folder tiers
};

// What a tier recorded with an entry so that a reader can check its bytes chunk by chunk as they arrive
// (Tier::recorded_digests): its size, its SHA-256, and the SHA-256 of every chunk (ChunkDigests::check_covers(size)
// holds).
struct RecordedDigests {
  Bytes size;
  Sha256 sha256;
  ChunkDigests chunks;
};

// Whether a write to an existing key replaces it. Content-addressed entries never need replacing.
enum class InstallOutcome { installed, already_present };

// One probe of `datavo cache check`.
struct CheckStep {
  std::string name;  // "credentials", "put", "get", "conditional put", "delete", "write", ...
  bool ok = false;
  std::string detail;  // what happened; why not, when it failed
};
struct CheckReport {
  std::vector<CheckStep> steps;
  bool readable = false;
  bool writable = false;
  std::vector<std::string> warnings;  // works, but not fully (e.g. conditional writes ignored)
};

// Whether `datavo cache verify` repairs what it finds bad: a folder tier quarantines the entry, a writable cloud
// tier deletes the object (a read-only one only reports it).
enum class Repair { no, yes };

// How `datavo cache verify` checks a cloud tier's objects (ObjectVerifier).
enum class VerifyDepth {
  metadata,  // a HEAD per object: the recorded size and SHA-256, and the service's own SHA-256 where it keeps one
  // and then every object that its HEAD found nothing wrong with downloaded (streamed into a hash, installed
  // nowhere) and compared with its recorded SHA-256
  full,
};
const char* to_string(VerifyDepth depth);

// An object that does not match what Datavo recorded for it.
struct BadObject {
  std::string object;  // the object name in the bucket or container
  std::string why;     // e.g. "size 10 but datavo-size 20", "no datavo-sha256 metadata"
  bool removed = false;
};

// What ObjectVerifier::verify_objects found. Every entry object counted in `objects` is in exactly one of
// verified_by_service, verified_by_download, metadata_only and bad.
struct ObjectVerifyReport {
  VerifyDepth depth = VerifyDepth::metadata;
  std::uint64_t objects = 0;               // entry objects checked (all instances)
  std::uint64_t verified_by_service = 0;   // the service's whole-object SHA-256 equals the recorded one (S3 only)
  std::uint64_t verified_by_download = 0;  // VerifyDepth::full: the downloaded bytes hash to the recorded SHA-256
  std::uint64_t metadata_only = 0;         // size and SHA-256 recorded and consistent, bytes not proven
  std::uint64_t bad = 0;
  std::uint64_t removed = 0;  // bad objects deleted (Repair::yes on a writable tier)
  std::vector<BadObject> bad_objects;
};

// The check of a cloud tier's entry objects against the metadata recorded with them (datavo-sha256, datavo-size),
// offered by the cloud tiers (Tier::verifier). With VerifyDepth::metadata it reads no object's bytes: one listing
// and a HEAD per object. An object is bad when its metadata is missing or unparseable, its size differs from
// datavo-size, a whole-object SHA-256 kept by the service differs from datavo-sha256, or (VerifyDepth::full) its
// bytes do not hash to datavo-sha256. Only S3 keeps a whole-object SHA-256 (the one Datavo sends with a single
// PUT; not for multipart uploads, whose checksum is composite); GCS and Azure keep MD5 / CRC32C, which cannot be
// compared with a recorded SHA-256, so their objects are metadata_only unless downloaded. An object gone between
// the listing and its HEAD is not counted. Repair::yes deletes bad objects from a writable tier (BadObject::removed;
// a delete that fails is a WARNING and said in `why`); a read-only tier's are only reported. An Error when the
// tier cannot be listed or an object cannot be read.
class ObjectVerifier {
 public:
  virtual ~ObjectVerifier() = default;
  virtual Result<ObjectVerifyReport> verify_objects(VerifyDepth depth, Repair repair) = 0;
};

// Whether a maintenance pass (`datavo cache gc`) only reports what it would remove.
enum class DryRun { no, yes };

// What processes that were killed (SIGKILL, a lost VM) left in a shared tier, found by
// LeftoverSweeper::sweep_leftovers. A process that ends in any other way removes these itself.
struct LeftoverReport {
  // Lease objects whose holder's recorded expiry passed over a lease_duration ago and that nobody has written for
  // a lease_duration: their holders died, and no reader of those shards has taken them over since.
  std::uint64_t expired_leases = 0;
  // `datavo cache check` probe objects written over k_stale_probe_age ago (a check takes seconds).
  std::uint64_t stale_probes = 0;
  // Of those, the ones deleted (DryRun::no).
  std::uint64_t removed = 0;
  // A lease that could not be read or a leftover that could not be deleted: the others are still tried.
  std::vector<Error> failures;
  // Not leftovers: the tier's entries as the sweep's one listing found them (Tier::list's rows, unsorted), so that
  // `cache gc`, which also expires entries past max_age, lists the tier once.
  std::vector<EntryInfo> entries;
};
inline constexpr Seconds k_stale_probe_age{600};

// The sweep of a writable shared tier's leftovers, offered by the cloud tiers (Tier::sweeper): one listing, one
// small GET per lease object not written for a lease_duration, one DELETE per leftover. Entries are never touched.
// An expired lease is deleted as a waiting reader takes it over (a plain DELETE: a reader that takes it over in the
// milliseconds between the GET and the DELETE loses its new lease, which costs at most one more fetch from the
// origin, never a wrong entry: entries are conditional creates). An Error when the tier cannot be listed;
// cancelled when a stop or a cancellation came (checked between objects).
class LeftoverSweeper {
 public:
  virtual ~LeftoverSweeper() = default;
  virtual Result<LeftoverReport> sweep_leftovers(DryRun dry_run) = 0;
};

// When an upload to a remote tier runs: after the local install, in the hierarchy's bounded background queue
// (the reader gets its local path at once), or before get_or_fetch() returns.
enum class UploadMode { background, sync };
const char* to_string(UploadMode mode);

// Who reaches a tier's entries (Tier::reach).
enum class TierReach { this_machine, shared };

class Tier {
 public:
  virtual ~Tier() = default;

  virtual const std::string& name() const = 0;
  // "folder", "memory", "s3", "gcs" or "azure_blob".
  virtual std::string_view type() const = 0;
  // The capacity; std::nullopt means unbounded.
  virtual std::optional<Bytes> max_bytes() const = 0;
  // True only for tiers whose entries are local files (folder tiers).
  virtual bool supports_direct_read() const = 0;
  // A read-only tier serves hits and is never written to or evicted from.
  virtual bool read_only() const = 0;
  // A human-readable location (a directory, a bucket URL) for `datavo cache info`.
  virtual std::string location() const = 0;

  // Whether a shard of `size` bytes could be installed here at all (writable and within max_bytes).
  bool can_hold(Bytes size) const;

  // Whether the tier holds `key`, without reading it (a HEAD request for remote tiers).
  virtual Result<bool> contains(const ShardKey& key) = 0;
  // Copies the entry for `key` into `sink` and returns what the tier recorded about its bytes (size, SHA-256), so
  // that the caller can check them before installing them anywhere; nullopt on a miss. For a remote tier this is
  // the lookup: one request, whose 404 is the miss. The sink may be restarted and written positionally.
  virtual Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) = 0;
  // Stores the bytes readable from `source` under `key`. `digest` is their SHA-256, already verified.
  virtual Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) = 0;
  // The chunk digests recorded with the entry for `key`, with its size and SHA-256, for a read that checks the bytes
  // as they arrive (a streamed read). nullopt on a miss, and for an entry recorded without them or with a record that
  // does not parse or fit the size (an object that another tool or an older Datavo wrote; every tier that keeps
  // none: the default). An Error only when the tier cannot be asked. A cloud tier answers with one HEAD: the list is
  // in the object's metadata (docs/protocol.md, "Where a cloud tier's chunk list lives").
  virtual Result<std::optional<RecordedDigests>> recorded_digests(const ShardKey& /*key*/) {
    return std::optional<RecordedDigests>{};
  }
  // Removes the entry; false when there was none.
  virtual Result<bool> remove(const ShardKey& key) = 0;
  virtual Result<TierUsage> usage() = 0;
  // Every entry of every instance.
  virtual Result<std::vector<EntryInfo>> list() = 0;

  // The counters this tier can keep. Default (a remote tier): all but evictions, which happen in the service (a
  // bucket's lifecycle rules) where no process sees them. Local tiers: all but the uploads and leases.
  virtual TierStatSet kept_stats() const;

  // This process's counters for this tier.
  TierCounters& counters() { return counters_; }
  const TierCounters& counters() const { return counters_; }

  // The local-tier capability of this tier (see the top of this file), or nullptr for a remote tier.
  virtual LocalTier* as_local() { return nullptr; }
  // The folder tier behind this tier, or nullptr when it is not one: for the maintenance that only a folder tier
  // offers (gc, verify, reset_stats). The hierarchy uses as_local() instead.
  virtual FolderTier* as_folder() { return nullptr; }
  // How the hierarchy installs into this tier: remote tiers upload in the background unless configured
  // `upload: sync`; local tiers are always written before the read returns.
  virtual UploadMode upload_mode() const { return UploadMode::sync; }
  // Cross-VM single flight (leases in a bucket), or nullptr when the tier offers none.
  virtual RemoteCoordination* coordination() { return nullptr; }
  // The check of this tier's objects for `datavo cache verify`, or nullptr when it offers none (folder tiers have
  // FolderTier::verify instead; the memory double has none).
  virtual ObjectVerifier* verifier() { return nullptr; }
  // The sweep of what killed processes left in this tier for `datavo cache gc`, or nullptr when it offers none
  // (local tiers sweep their own leftovers in FolderTier::gc; read-only tiers are never written).
  virtual LeftoverSweeper* sweeper() { return nullptr; }
  // Who reaches this tier's entries: this machine alone (folder and memory tiers), or other machines as well (a
  // bucket). `datavo cache rm` leaves shared tiers alone unless they are asked for.
  virtual TierReach reach() const { return TierReach::this_machine; }
  // The age past which `datavo cache gc` removes an entry (a folder tier also misses it on read); nullopt: none.
  virtual std::optional<Seconds> max_age() const { return std::nullopt; }
  // Probes whether the tier can be read and written (`datavo cache check`), leaving nothing behind.
  virtual CheckReport check() = 0;

 private:
  TierCounters counters_;
};

// Whether a lookup in a local tier counts a hit or a miss and bumps the entry's mtime (the LRU clock).
enum class Touch { yes, no };
// Whether LocalTier::begin() continues the partial download of the key that a writer that died left behind.
enum class Resume { no, partial };
// Whether persisting a local tier's counters waits for another process that is persisting its own.
enum class LockWait { block, skip_if_busy };

// An exclusive lock on one shard of one local tier, across the threads of this process and, where the tier's
// filesystem allows, across processes (single flight). Released on destruction. It may outlive the tier object
// that issued it. Not thread-safe (one owner).
//
// The holder of a lock that excludes other processes publishes its progress for them (docs/hierarchy.md, "Reading
// while fetching"): the staging file it fills and how many leading bytes of it are verified against the ticket's
// chunk digests. Waiters read it with LocalTier::landing_progress(). A published staging file is never truncated
// or rewritten in place (ShardTransaction::restart() begins a new one), so verified bytes stay what they were.
// The record is removed when the lock is released.
class ShardLock {
 public:
  virtual ~ShardLock() = default;
  // Whether other processes are excluded too (false: the threads of this process only).
  virtual bool across_processes() const = 0;
  // The holder begins filling the staging file that `staged` reads (0 bytes verified of it so far). Best effort:
  // a record that cannot be written only costs the waiters their early start. No-op without across_processes().
  virtual void publish_staging(const ShardHandle& /*staged*/) {}
  // The first `prefix` bytes of the published staging file, of a shard of `total` bytes, are verified.
  virtual void publish_verified(Bytes /*prefix*/, Bytes /*total*/) {}
};

// What the holder of a shard's lock in another process of this host published (ShardLock::publish_staging and
// publish_verified), as LocalTier::landing_progress() reads it.
struct LandingProgress {
  std::string path;          // the staging file, as the holder named it (it may have been renamed since)
  std::uint64_t device = 0;  // its identity: a file found at `path` that is another one is not it
  std::uint64_t inode = 0;
  std::uint64_t holder = 0;  // the holder's pid
  Bytes verified;            // the first `verified` bytes of that file match the chunk digests
  Bytes total;               // the shard's size; 0 until a first prefix is verified
};

// One install in flight into a local tier: a staging file that takes the shard's bytes (appended, or written
// positionally by parallel ranged reads), then commit() makes it the entry for its key by a rename, the only commit
// point. Destroyed without a successful commit, it aborts: the staging file is removed and nothing was installed.
// REQUIRES: the tier that began it outlives it.
// restart() never truncates the staging file: readers may have mapped its bytes; it abandons the file (they keep
// reading it) and goes on in a new one, which open_staged() then reads.
// Thread safety: as ByteSink says (one thread for write / restart / digest / commit; write_at from several).
class ShardTransaction : public ByteSink, public PositionalSink {
 public:
  // How many bytes the staging file already held when the transaction began: a download that a writer that died
  // left half-done, continued (Resume::partial); 0 for a fresh one and after restart().
  virtual Bytes resumed_from() const = 0;
  // The SHA-256 of every byte written so far, as read back from the staging file: what gets committed is what was
  // hashed. An Error when the tier cannot read its own file back (the tier's failure, not the source's).
  virtual Result<Sha256> digest() = 0;
  // A read-only handle on the staged bytes, so that they can be copied into other tiers even when this one does
  // not commit them (too small, or its commit failed). The handle keeps reading after the abort.
  virtual Result<ShardHandle> open_staged() = 0;
  // Records the size and digest with the bytes and renames them to the entry for the key; when an entry is there
  // already (same content hash, same bytes) the staged copy is dropped and that entry is used. Returns a handle on
  // the committed entry. Makes room first in a bounded tier and never evicts the entry just committed. On an Error
  // nothing is installed and the staged bytes stay (open_staged() still reads them; destruction removes them).
  // Call at most once successfully; afterwards only destruction.
  virtual Result<ShardHandle> commit() = 0;
};

// A tier whose entries are local files that readers open directly (folder tiers): the landing zone of the
// hierarchy. See the top of this file for why this is not on Tier.
class LocalTier : public Tier {
 public:
  bool supports_direct_read() const final { return true; }
  TierStatSet kept_stats() const override;
  LocalTier* as_local() final { return this; }

  // Opens the entry for `key` for reading, after the tier's checks (a damaged or expired entry is a miss). With
  // Touch::yes it counts a hit or a miss and bumps the entry's mtime. nullopt on a miss.
  virtual Result<std::optional<ShardHandle>> open(const ShardKey& key, Touch touch = Touch::yes) = 0;
  // open(key, Touch::no): looks without counting or touching.
  Result<std::optional<ShardHandle>> peek(const ShardKey& key) { return open(key, Touch::no); }
  // The SHA-256 of `entry`, an entry of `key` opened by open(): the digest recorded at install, else (an entry
  // installed without one) computed from its bytes.
  virtual Result<Sha256> digest_of(const ShardKey& key, const ShardHandle& entry) = 0;

  // Waits for and takes the exclusive lock of `key` (single flight: one fetch per key on this machine). When the
  // tier cannot lock across processes, the lock returned excludes this process's threads only (and the tier logs
  // why, once). The wait is cancellable: it ends with `cancelled`, holding nothing, within a fraction of a
  // second of a cancellation of the process or of the caller's work (a SampleStream cancelled or destroyed while
  // one of its loads waits here).
  virtual Result<std::unique_ptr<ShardLock>> lock_shard(const ShardKey& key) = 0;
  // What the holder of lock_shard(key) in another process of this host published of its landing (ShardLock); nullopt
  // when nothing is published (the default), or the record is not whole. Cheap (one small read): waiters poll it.
  virtual std::optional<LandingProgress> landing_progress(const ShardKey& /*key*/) { return std::nullopt; }
  // Opens the staging file `progress` names, read only; nullopt when it is gone from that path or is another file
  // (another inode) now.
  virtual std::optional<ShardHandle> open_landing(const LandingProgress& /*progress*/) { return std::nullopt; }
  // Begins a staging transaction for `key`. With `size` known, fails at once (no_space) when the tier's filesystem
  // has no room for that many bytes, before any byte moves. With Resume::partial, continues the partial download of
  // `key` that a writer that died left behind, when there is one (resumed_from() > 0); call it so only while holding
  // lock_shard(key), so that no live writer is robbed. permission_denied on a read-only tier.
  virtual Result<std::unique_ptr<ShardTransaction>> begin(const ShardKey& key, std::optional<Bytes> size = std::nullopt,
                                                          Resume resume = Resume::no) = 0;

  // An order hint: when a reader will next need the entry of `key`, as a place in the tier's LRU order. The entry is
  // then evicted as if it had last been read at `as_if_read_at`, and a plain hit leaves that place alone (a hinted
  // entry counts as fresh), so that eviction, by any process, follows the hints. Other entries keep their order.
  // Answers false when the tier holds no such entry or cannot place it (the default; a read-only tier; an entry
  // that this user may not re-date); an Error only for an unexpected failure. Thread-safe; cheap (one syscall).
  virtual Result<bool> place(const ShardKey& /*key*/, std::chrono::system_clock::time_point /*as_if_read_at*/) {
    return false;
  }

  // The bytes the tier's filesystem has free for this user (statvfs f_bavail); nullopt when unknown (the default).
  virtual std::optional<Bytes> free_space() const { return std::nullopt; }

  // The counters of every process that used the tier (persisted in the tier) plus this process's unflushed ones.
  virtual Result<TierStats> cumulative_stats() = 0;
  // Adds this process's counters to the persisted ones and zeroes them; safe against concurrent processes. With
  // LockWait::skip_if_busy it returns at once (keeping the counters for the next flush) when another process is
  // flushing, so that a hit never queues behind it.
  virtual Result<void> flush_stats(LockWait wait = LockWait::block) = 0;

  // Persisting the counters of a tier that has no place of its own on this machine (a remote tier), so that they
  // are kept per machine as a folder tier's are. keep_stats_of(t): from now on flush_stats() also adds t's counters
  // (t->counters(), taken) to the ones persisted here under t's name; false when this tier cannot keep them (the
  // default; a read-only tier). kept_stats_of(t): what every process of this machine persisted here for t plus t's
  // unflushed counters; nullopt when this tier does not keep t's.
  virtual bool keep_stats_of(std::shared_ptr<Tier> /*remote*/) { return false; }
  virtual Result<std::optional<TierStats>> kept_stats_of(const Tier& /*remote*/) { return std::optional<TierStats>{}; }
};

}  // namespace datavo
