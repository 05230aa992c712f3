// ShardCacheTier: a folder tier, the local landing zone of the hierarchy.
//
// On-disk layout (docs/layout.md):
//   <path>/<instance>/<content_hash>.tar       committed entries; mtime is the LRU clock
//   <path>/<instance>/<content_hash>.sha256    digest sidecar, only where user xattrs are unsupported
//   <path>/.staging/<host>.<pid>.<random>.tmp  in-flight installs, one file per writer
//   <path>/.locks/<instance>.<content_hash>.lock   per-shard advisory locks (single flight)
//   <path>/.quarantine/                        entries that failed `verify`
//   <path>/.stats.json                         cumulative counters of every process
//
// Invariants:
//   - The rename from .staging/ to the final name is the only commit point; nothing partial is ever visible
//     under a final name. Correctness never depends on flock: where it is a no-op or fails (ENOLCK, ENOSYS on
//     Lustre and some NFS), the tier logs once and relies on the rename alone.
//   - Entries are written 0664 (never less than 0440) and directories 02775 modulo the umask, so that a tier
//     shared by a Unix group is readable by every member (docs/layout.md, "Sharing").
//   - Eviction is LRU by mtime, down to the low watermark; it never touches .staging/, and readers holding a
//     ShardHandle keep reading after their entry is evicted.
//
// Thread safety: every method may be called from several threads and processes at once.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "datavo/tier.hpp"

namespace datavo {

enum class Access { read_write, read_only };
enum class DryRun { no, yes };
enum class Repair { no, yes };
// Whether a staged entry's data is flushed to stable storage before the rename that commits it.
enum class Durability { fsync_before_commit, no_sync };

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
};

namespace folder {
class TrailingDigest;
}

// A staging file in a folder tier's .staging/. Unlinked on destruction unless committed. Movable only.
// Files of a few MiB and more are hashed by a background thread that reads the written bytes back while the
// writer goes on (src/tier/folder/trailing_digest.hpp), so write() costs a write(2) and no hashing.
// Not thread-safe: one thread at a time uses a StagingFile.
class StagingFile final : public ByteSink {
 public:
  StagingFile() = default;
  ~StagingFile() override;
  StagingFile(StagingFile&& other) noexcept;
  StagingFile& operator=(StagingFile&& other) noexcept;

  Result<void> write(const void* data, std::size_t size) override;
  Bytes written() const override { return written_; }
  Result<void> restart() override;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // The SHA-256 of everything written so far, as read back from the file (an I/O error if it cannot be). Waits
  // for the background hash to catch up; the answer is remembered until the next write or restart.
  Result<Sha256> digest();
  // Adopts bytes written into fd() by other means (copy_file_range): sets the size and digest directly.
  void adopt(Bytes size, const Sha256& digest);

 private:
  friend class ShardCacheTier;
  StagingFile(int fd, std::string path, Durability durability);
  // After the rename: nothing is left to unlink.
  void mark_committed();
  int fd_ = -1;
  std::string path_;
  Bytes written_;
  std::unique_ptr<folder::TrailingDigest> hasher_;
  std::optional<Sha256> digest_;  // known: finished, or adopted
};

struct EvictionReport {
  std::uint64_t entries_evicted = 0;
  Bytes bytes_freed;
  std::uint64_t expired = 0;  // of which by max_age
  std::uint64_t staging_swept = 0;
  std::uint64_t locks_swept = 0;
  Bytes used_after;
};

struct VerifyReport {
  std::uint64_t checked = 0;
  std::uint64_t ok = 0;
  std::uint64_t bad = 0;           // digest or size mismatch
  std::uint64_t unverifiable = 0;  // no digest recorded
  std::uint64_t quarantined = 0;
  std::vector<std::string> bad_paths;
};

class ShardCacheTier final : public Tier {
 public:
  // Returns invalid_argument for an empty path. Does no I/O: the directory is created on first write.
  static Result<std::shared_ptr<ShardCacheTier>> create(FolderTierOptions options);

  const std::string& name() const override { return options_.name; }
  std::string_view type() const override { return "folder"; }
  std::optional<Bytes> max_bytes() const override { return options_.max_bytes; }
  bool supports_direct_read() const override { return true; }
  bool read_only() const override { return options_.access == Access::read_only; }
  std::string location() const override { return options_.path; }
  const FolderTierOptions& options() const { return options_; }
  ShardCacheTier* as_folder() override { return this; }

  // Opens the entry for `key` and bumps its mtime (UTIME_NOW; EPERM/EROFS tolerated). nullopt on a miss.
  // Counts a hit or a miss.
  Result<std::optional<ShardHandle>> open(const ShardKey& key);
  // Like open() but counts nothing and does not touch mtime.
  Result<std::optional<ShardHandle>> peek(const ShardKey& key);

  // Creates a new staging file. permission_denied for a read-only tier.
  Result<StagingFile> begin_staging();
  // Attaches `digest` to the staged file and renames it to the entry for `key`. When an entry is already there
  // the staged copy is discarded. Either way, returns a handle on the committed entry. Evicts afterwards if the
  // tier is over budget (never the entry just committed). On an Error `staged` is left as it was (still owned
  // by the caller, still on disk), so that its bytes can be installed elsewhere.
  Result<ShardHandle> commit(StagingFile&& staged, const ShardKey& key);

  // Tier interface.
  Result<bool> contains(const ShardKey& key) override;
  Result<bool> read_into(const ShardKey& key, ByteSink& sink) override;
  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override;
  Result<bool> remove(const ShardKey& key) override;
  Result<TierUsage> usage() override;
  Result<std::vector<EntryInfo>> list() override;

  // Evicts to the low watermark when over max_bytes and removes entries older than max_age, then sweeps
  // staging files of dead writers and orphaned locks. With DryRun::yes nothing is deleted.
  Result<EvictionReport> gc(DryRun dry_run);
  // Re-hashes every entry against its recorded digest; Repair::yes moves bad entries to .quarantine/.
  Result<VerifyReport> verify(Repair repair);

  // The recorded SHA-256 of an entry (xattr, else sidecar); nullopt when none was recorded.
  Result<std::optional<Sha256>> recorded_digest(const ShardKey& key);

  // An exclusive per-shard lock across threads and processes. Released on destruction. When the filesystem
  // does not support flock the guard is still returned (held in-process only) and a warning is logged once.
  class ShardLock {
   public:
    ShardLock() = default;
    ~ShardLock();
    ShardLock(ShardLock&&) noexcept;
    ShardLock& operator=(ShardLock&&) noexcept;

   private:
    friend class ShardCacheTier;
    struct State;
    std::unique_ptr<State> state_;
  };
  Result<ShardLock> lock_shard(const ShardKey& key);

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

  ~ShardCacheTier() override;
  struct Impl;

 private:
  explicit ShardCacheTier(FolderTierOptions options);
  // Evicts expired entries, then LRU entries down to the low watermark if over max_bytes; never `keep`.
  Result<EvictionReport> evict(DryRun dry_run, const ShardKey* keep);
  // evict() after an install of `installed` bytes, when a budget is set, the tier may be over it, and no other
  // process is evicting this tier.
  void enforce_budget(const ShardKey* just_installed, Bytes installed);
  FolderTierOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace datavo
