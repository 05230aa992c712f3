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
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "datavo/tier.hpp"

namespace datavo {

enum class DryRun { no, yes };
enum class Repair { no, yes };
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

struct FolderTierOptions {
  std::string path;                // created on first write; ~ and $VAR already expanded
  std::string name;                // defaults to the path
  std::optional<Bytes> max_bytes;  // nullopt (or 0 in config) means unbounded
  std::optional<Seconds> max_age;  // entries not read within this are evicted
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

namespace folder {
class StagingFile;
class ShardLock;
}  // namespace folder

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

// Whether an open() counts a hit or miss and bumps the entry's mtime (the LRU clock).
enum class Touch { yes, no };

class FolderTier final : public Tier {
 public:
  // Returns invalid_argument for an empty path. Does no I/O: the directory is created on first write.
  static Result<std::shared_ptr<FolderTier>> create(FolderTierOptions options);

  const std::string& name() const override { return options_.name; }
  std::string_view type() const override { return "folder"; }
  std::optional<Bytes> max_bytes() const override { return options_.max_bytes; }
  bool supports_direct_read() const override { return true; }
  bool read_only() const override { return options_.access == Access::read_only; }
  std::string location() const override { return options_.path; }
  const FolderTierOptions& options() const { return options_; }
  FolderTier* as_folder() override { return this; }

  // Opens the entry for `key`, checks it as options().verify says, and with Touch::yes counts a hit or a miss and
  // bumps its mtime (UTIME_NOW; EPERM/EROFS tolerated). nullopt on a miss, also when the entry was damaged (it is
  // then quarantined, with a WARNING, and counted in `quarantined`) or older than max_age (then removed).
  Result<std::optional<ShardHandle>> open(const ShardKey& key, Touch touch = Touch::yes);
  // open(key, Touch::no).
  Result<std::optional<ShardHandle>> peek(const ShardKey& key) { return open(key, Touch::no); }

  // Creates a new staging file for `key`. permission_denied for a read-only tier.
  Result<folder::StagingFile> begin_staging(const ShardKey& key);
  // The partial staging file of `key` left by a writer that died (this host, pid gone), claimed for the caller
  // and holding the bytes it had written, so that the download can continue where it stopped; nullopt when there
  // is none. Call only while holding lock_shard(key), so that no live writer is robbed.
  Result<std::optional<folder::StagingFile>> adopt_partial(const ShardKey& key);
  // Records the staged file's size and digest and renames it to the entry for `key`. When an entry is already
  // there the staged copy is discarded. Either way, returns a handle on the committed entry. Evicts afterwards if
  // the tier is over budget (never the entry just committed). On an Error `staged` is left as it was (still owned
  // by the caller, still on disk), so that its bytes can be installed elsewhere.
  Result<ShardHandle> commit(folder::StagingFile&& staged, const ShardKey& key);

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

  // An exclusive per-shard lock across threads and processes (folder::ShardLock releases it on destruction).
  // When no lock directory can be used the guard is still returned (held in-process only) and a warning is
  // logged once.
  Result<folder::ShardLock> lock_shard(const ShardKey& key);
  // The mechanism lock_shard() uses on this tier, probed once at first use (no I/O after that).
  LockMechanism lock_mechanism();

  // Cumulative counters of every process (persisted in .stats.json) plus this process's unflushed ones.
  Result<TierStats> cumulative_stats();
  // Adds this process's counters to .stats.json and zeroes them. Safe against concurrent processes. With
  // LockWait::skip_if_busy it returns at once (keeping the counters for the next flush) when another process is
  // flushing, so that a hit never queues behind another process's flush.
  enum class LockWait { block, skip_if_busy };
  Result<void> flush_stats(LockWait wait = LockWait::block);
  // Zeroes .stats.json and this process's counters.
  Result<void> reset_stats();

  std::string entry_path(const ShardKey& key) const;

  ~FolderTier() override;
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
  // Shared by commit() and install_copy(); see commit() for the contract.
  Result<std::pair<ShardHandle, InstallOutcome>> commit_staged(folder::StagingFile& staged, const ShardKey& key);
  Result<EntryRecord> record_of_fd(const ShardKey& key, int fd, RecordPart part);
  FolderTierOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace datavo
