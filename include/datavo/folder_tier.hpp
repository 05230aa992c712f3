// FolderTier: a folder tier, the local landing zone of the hierarchy (the spec's FolderTier).
//
// On-disk layout (docs/layout.md):
//   <path>/<instance>/<content_hash>.tar       committed entries; mtime is the LRU clock
//   <path>/<instance>/<content_hash>.sha256    digest and size sidecar, only where user xattrs are unsupported
//   <path>/.staging/<host>.<pid>.<random>.<instance>.<content_hash>.tmp   in-flight installs, one per writer
//   <path>/.locks/<instance>.<content_hash>.lock   per-shard locks (single flight)
//   <path>/.quarantine/                        damaged entries moved aside (on a hit, or by `verify --repair`)
//   <path>/.stats.json                         cumulative counters of every process
//
// Invariants:
//   - The rename from .staging/ to the final name is the only commit point; nothing partial is ever visible
//     under a final name. Correctness never depends on the per-shard locks: they only remove duplicate fetches.
//   - Every entry records its size and SHA-256 at install (xattrs user.datavo.size / user.datavo.sha256, else the
//     sidecar), and the key it was installed as (xattr user.datavo.key, "<instance>/<hash>"; a sidecar is named by
//     its key already), so that an entry renamed over another's name is not taken for it: xattrs travel with the
//     inode. A hit refuses an entry whose size or recorded key differs from the recorded one (`verify: size`, the
//     default; the fstat the hit does anyway, and the xattrs once per inode and process), or whose bytes differ
//     (`verify: full` on every hit, `sampled` one hit in N): the entry is quarantined with a WARNING and the hit
//     becomes a miss, so that the read falls through to a slower tier or the origin and the good copy is promoted back.
//   - Directories get group rwx and setgid, entries group rw, lock files group rw, whatever the writer's umask:
//     a tier shared by a Unix group stays usable by every member (docs/layout.md, "Sharing").
//   - Eviction is LRU by mtime, down to the low watermark; it never touches .staging/, and readers holding a
//     ShardHandle keep reading after their entry is evicted.
//   - Per-shard locks use flock when a probe at first use shows that it excludes a second open file
//     description; otherwise (ENOLCK, ENOSYS, or a flock that succeeds twice, as on some NFS and Lustre mounts)
//     an O_EXCL lock file with the holder's host, pid and boot id, whose mtime is its heartbeat.
//
// Thread safety: every method may be called from several threads and processes at once.
#pragma once

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "datavo/tier.hpp"

namespace datavo {

// Whether a staged entry's data is flushed to stable storage before the rename that commits it.
enum class Durability { fsync_before_commit, no_sync };
// How much a hit checks of the entry against what was recorded at install.
enum class VerifyOnHit {
  size,     // the size (free: the hit's fstat)
  full,     // the SHA-256 of every byte, on every hit
  sampled,  // the SHA-256 on one hit in FolderTierOptions::verify_sample_every, the size on the others
};
const char* to_string(VerifyOnHit verify);
const char* to_string(Durability durability);

// How the per-shard locks of a tier exclude other processes (see the top of this file).
enum class LockMechanism {
  flock,             // flock(2), released by the kernel when the holder dies
  exclusive_create,  // an O_EXCL lock file with a heartbeat; taken over when the heartbeat is stale
  process_only,      // no lock directory could be used: single flight within this process only
};
const char* to_string(LockMechanism mechanism);

// The lru_resolution of a folder tier that does not set one: 10 s, or a tenth of max_age when that is shorter.
Seconds default_lru_resolution(const std::optional<Seconds>& max_age);

struct FolderTierOptions {
  std::string path;                // created on first write; ~ and $VAR already expanded
  std::string name;                // defaults to the path
  std::optional<Bytes> max_bytes;  // nullopt (or 0 in config) means unbounded
  std::optional<Seconds> max_age;  // entries not read within this are evicted
  // A hit leaves the entry's mtime (the LRU clock) alone while it is younger than this, by the filesystem's clock: a
  // hot hit is then open, fstat and close, without the futimens. LRU order, and max_age, hold to within it. Zero
  // bumps on every hit. Less than max_age when both are set. nullopt: default_lru_resolution(max_age), which
  // create() fills in. shards.yaml: `lru_resolution`.
  std::optional<Seconds> lru_resolution;
  Access access = Access::read_write;
  // Eviction stops once usage is at or below this fraction of max_bytes, so that it is not paid per install.
  double low_watermark = 0.9;
  // Staging files untouched for this long are swept even when their writer's pid cannot be checked.
  Seconds stale_staging_age = std::chrono::hours(6);
  // fsync_before_commit: after a crash the final name holds the whole entry or nothing (docs/layout.md).
  // no_sync: no fdatasync. A killed process still never leaves a partial entry (the rename comes after the last
  // byte), but after a power loss or kernel crash an entry may hold fewer or zeroed bytes until `cache verify`.
  // For scratch disks that do not outlive the machine. shards.yaml: `durability: fsync | none`.
  Durability durability = Durability::fsync_before_commit;
  // shards.yaml: `verify: size | full | sampled`, `verify_sample_every: N`.
  VerifyOnHit verify = VerifyOnHit::size;
  std::uint64_t verify_sample_every = 100;
  // An O_EXCL lock file whose heartbeat (mtime) is older than this is taken over by a waiter. Its holder renews
  // it every stale_lock_age / 4.
  Seconds stale_lock_age{20};
};

struct EvictionReport {
  std::uint64_t entries_evicted = 0;
  Bytes bytes_freed;
  std::uint64_t expired = 0;  // of which by max_age
  std::uint64_t staging_swept = 0;
  std::uint64_t locks_swept = 0;
  Bytes used_after;
  Bytes entries_bytes_after;  // of committed entries only (used_after counts staging files and sidecars too)
};

struct VerifyReport {
  std::uint64_t checked = 0;
  std::uint64_t ok = 0;
  std::uint64_t bad = 0;           // digest or size mismatch
  std::uint64_t unverifiable = 0;  // no digest recorded
  std::uint64_t quarantined = 0;
  std::vector<std::string> bad_paths;
};

// What was recorded about an entry at install.
struct EntryRecord {
  std::optional<Sha256> sha256;
  std::optional<Bytes> size;
  std::optional<std::string> key;  // "<instance>/<hash>" it was installed as; nullopt in a sidecar or older entry
};

class FolderTier final : public LocalTier {
 public:
  // Returns invalid_argument for an empty path. Does no I/O: the directory is created on first write.
  static Result<std::shared_ptr<FolderTier>> create(FolderTierOptions options);

  const std::string& name() const override { return options_.name; }
  std::string_view type() const override { return "folder"; }
  std::optional<Bytes> max_bytes() const override { return options_.max_bytes; }
  bool read_only() const override { return options_.access == Access::read_only; }
  std::string location() const override { return options_.path; }
  std::optional<Seconds> max_age() const override { return options_.max_age; }
  const FolderTierOptions& options() const { return options_; }
  FolderTier* as_folder() override { return this; }

  // LocalTier.
  // Opens the entry for `key` and checks it as options().verify says; with Touch::yes counts a hit or a miss and
  // bumps its mtime (UTIME_NOW; EPERM/EROFS tolerated) when that is older than options().lru_resolution. nullopt on a
  // miss, also when the entry was damaged (it is then quarantined, with a WARNING, and counted in `quarantined`) or
  // older than max_age (then removed).
  Result<std::optional<ShardHandle>> open(const ShardKey& key, Touch touch = Touch::yes) override;
  // The digest recorded at install (xattrs, else the sidecar), else the SHA-256 of the entry's bytes.
  Result<Sha256> digest_of(const ShardKey& key, const ShardHandle& entry) override;
  // Sets the entry's mtime to `as_if_read_at` (in the filesystem's clock, see the clock offset), marked as an order
  // hint in its sub-millisecond digits (docs/hierarchy.md, "Order hints"), which a hit takes as fresh. Kept at least
  // max_age / 2 younger than max_age, so that a hint never expires an entry. false on a miss, a read-only tier, and
  // an entry this user does not own (only an owner may set an explicit time; the entry keeps its place).
  Result<bool> place(const ShardKey& key, std::chrono::system_clock::time_point as_if_read_at) override;
  // statvfs(2) of the tier's path, else of its nearest existing parent.
  std::optional<Bytes> free_space() const override;
  // flock on .locks/<instance>.<hash>.lock, or an O_EXCL lock file where flock does not exclude (see the top of
  // this file). When no lock directory can be used the lock is held in-process only and a warning is logged once.
  Result<std::unique_ptr<ShardLock>> lock_shard(const ShardKey& key) override;
  // The record beside the lock file (.locks/<instance>.<hash>.lock.progress), written by a holder of this host in
  // another process; this process's own holders are followed in memory (SampleStream's flights).
  std::optional<LandingProgress> landing_progress(const ShardKey& key) override;
  std::optional<ShardHandle> open_landing(const LandingProgress& progress) override;
  // A staging file in .staging/ (named as above). The room check is statvfs(2) on the tier's path (unknown counts as
  // room). A partial file that cannot be continued (its directory unreadable) is counted in `errors` and warned
  // about, and a fresh file is begun instead.
  Result<std::unique_ptr<ShardTransaction>> begin(const ShardKey& key, std::optional<Bytes> size = std::nullopt,
                                                  Resume resume = Resume::no) override;
  // Persisted in .stats.json; the counters of the tiers it keeps (keep_stats_of) are there too, under
  // "kept_tiers": {"<tier name>": {...}}.
  Result<TierStats> cumulative_stats() override;
  Result<void> flush_stats(LockWait wait = LockWait::block) override;
  bool keep_stats_of(std::shared_ptr<Tier> remote) override;
  Result<std::optional<TierStats>> kept_stats_of(const Tier& remote) override;

  // Tier interface.
  Result<bool> contains(const ShardKey& key) override;
  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override;
  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override;
  Result<bool> remove(const ShardKey& key) override;
  Result<TierUsage> usage() override;
  Result<std::vector<EntryInfo>> list() override;
  // Writes, syncs, reads back and removes a probe file in .staging/, and reports the lock mechanism.
  CheckReport check() override;

  // Evicts to the low watermark when over max_bytes and removes entries older than max_age, then sweeps
  // staging files of dead writers and orphaned locks. With DryRun::yes nothing is deleted.
  Result<EvictionReport> gc(DryRun dry_run);
  // Re-hashes every entry against its recorded digest and size; Repair::yes moves bad entries to .quarantine/.
  Result<VerifyReport> verify(Repair repair);

  // What was recorded for an entry at install (xattrs, else the sidecar); nullopt when the entry is absent.
  Result<std::optional<EntryRecord>> record_of(const ShardKey& key);
  // The mechanism lock_shard() uses on this tier, probed once at first use (no I/O after that).
  LockMechanism lock_mechanism();
  // Zeroes .stats.json (the kept tiers' counters with it) and this process's counters.
  Result<void> reset_stats();

  std::string entry_path(const ShardKey& key) const;

  ~FolderTier() override;
  // The state shared by the folder tier's files (src/tier/folder/internal.hpp).
  struct Impl;

 private:
  explicit FolderTier(FolderTierOptions options);
  // Evicts expired entries, then LRU entries down to the low watermark if over max_bytes; never `keep`.
  Result<EvictionReport> evict(DryRun dry_run, const ShardKey* keep);
  // Held while one entry is committed into a bounded tier (src/tier/folder/eviction.cpp, "The budget across
  // processes"): the evict lock and the shared count of committed bytes.
  struct BudgetLock;
  // Makes room for the staged entry about to be committed; nullptr when the tier is unbounded.
  Result<std::unique_ptr<BudgetLock>> reserve();
  // The entry of `size` is committed: the shared count grows by it.
  void committed(BudgetLock* lock, Bytes size);
  // The bulk max_age pass, at most once a minute per process; never removes `just_committed`.
  void expire_if_due(const ShardKey& just_committed);
  // Moves a damaged entry to .quarantine/ (or, on a read-only tier, only reports it) with a WARNING.
  void quarantine(const ShardKey& key, const std::string& path, const std::string& problem);
  // The record of the entry of `key` open as `fd`: xattrs, else the sidecar. With RecordPart::size, an entry whose
  // size xattr is there costs one fgetxattr and its digest is not read.
  enum class RecordPart { size, all };
  Result<EntryRecord> record_of_fd(const ShardKey& key, int fd, RecordPart part);
  // The hit path's checks of the entry of `key` open as `fd` (its size, recorded key and, when options().verify
  // says so, its bytes): false when it is damaged (then quarantined).
  Result<bool> intact(const ShardKey& key, const std::string& path, int fd, std::uint64_t inode_key, Bytes size);
  // Counts the hit on the entry open as `fd`, and bumps its mtime (the LRU clock) unless `mtime` is younger than
  // options().lru_resolution or is an order hint (place()).
  void touch_hit(const std::string& path, int fd, Bytes size, const struct timespec& mtime);
  FolderTierOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace datavo
