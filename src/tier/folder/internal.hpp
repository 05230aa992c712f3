// FolderTier::Impl: the state shared by the files of the folder tier (folder_tier.cpp: lookups and hits;
// install.cpp: staging and commit; eviction.cpp; verify.cpp; locks.cpp; stats.cpp). Internal.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "tier/folder/locks.hpp"

namespace datavo {
namespace folder {

class StagingFile;

inline constexpr const char* k_size_xattr = "user.datavo.size";
inline constexpr const char* k_digest_xattr = "user.datavo.sha256";
inline constexpr const char* k_key_xattr = "user.datavo.key";
inline constexpr const char* k_entry_suffix = ".tar";
inline constexpr const char* k_sidecar_suffix = ".sha256";
// Directories are setgid so that entries inherit the tier's group; group rwx whatever the umask, so that a tier
// shared by a Unix group stays usable by all its members (docs/layout.md, "Sharing").
inline constexpr mode_t k_dir_mode = 02775;
inline constexpr mode_t k_dir_group_bits = 02070;
// Entries are group-writable so that members of the group can bump mtime (the LRU clock) on a hit; so are lock
// files, which every member opens for writing.
inline constexpr mode_t k_entry_mode = 0664;
inline constexpr mode_t k_entry_group_bits = 0060;
// A lock file left by a dead holder is only swept once it is older than this, so that a lock file that is
// being created right now is never mistaken for an orphan.
inline constexpr Seconds k_orphan_lock_age{60};

// The mode a new entry or lock file gets: the umask applies to the others' bits only.
mode_t entry_mode();

std::chrono::system_clock::time_point to_time_point(const struct timespec& ts);
struct timespec to_timespec(std::chrono::system_clock::time_point t);
// An order hint's mtime (FolderTier::place) carries this in its sub-millisecond nanoseconds; a natural mtime does by
// chance once in a million, and is then only left unbumped by hits (within max_age). A filesystem that keeps
// coarser times drops the mark: its hinted entries are bumped by hits like any other.
inline constexpr long k_order_hint_mark_ns = 417'417;
struct timespec order_hint_time(std::chrono::system_clock::time_point t);
bool is_order_hint(const struct timespec& mtime);

// "<instance>/<hash>": the key as recorded in an entry's k_key_xattr.
std::string key_record(const ShardKey& key);

// Reads the record of the entry open as `fd` (xattrs); nullopt fields when absent. With size_only the digest is
// not read when the size is there (the size and the key are).
enum class XattrPart { size_only, both };
Result<EntryRecord> read_record_xattrs(int fd, XattrPart part);
// Parses a sidecar: "<sha256 hex>[ <size>]\n".
EntryRecord parse_sidecar(std::string_view text);

}  // namespace folder

struct FolderTier::Impl {
  explicit Impl(FolderTier& tier) : self(tier) {}
  FolderTier& self;  // the tier this is the state of
  std::string root, staging_dir, locks_dir, quarantine_dir, stats_file;
  // The tiers whose counters this one keeps (keep_stats_of); read and written under kept_mu.
  std::mutex kept_mu;
  std::vector<std::shared_ptr<Tier>> kept;

  // Staging and commits (install.cpp).
  // A new, empty staging file for `key`.
  Result<folder::StagingFile> new_staging(const ShardKey& key);
  // The staging file of `key` that a writer that died left behind (this host, pid gone), claimed by renaming it to a
  // name of this process, holding the bytes it had; nullopt when there is none. REQUIRES: lock_shard(key) held.
  Result<std::optional<folder::StagingFile>> adopt_partial(const ShardKey& key);
  // Whether the filesystem of the tier has room for `size` more bytes (statvfs; unknown counts as room).
  bool has_room(Bytes size) const;
  // The OS-level half of lock_shard() (locks.cpp), by mechanism: held in-process only when it cannot be taken;
  // cancelled when the wait for it is stopped (util::must_stop()).
  Result<void> hold_exclusive(folder::HeldLock& lock);
  Result<void> hold_flock(folder::HeldLock& lock);
  // Commits `staged` (see ShardTransaction::commit): the budget, the record, the rename, the expiry pass.
  Result<std::pair<ShardHandle, InstallOutcome>> commit(folder::StagingFile& staged);
  // The record and the rename of commit(), without the budget.
  Result<std::pair<ShardHandle, InstallOutcome>> rename_into_place(folder::StagingFile& staged);

  // Shared with every ShardLock, so that a lock may outlive the tier object that issued it.
  std::shared_ptr<folder::LockTable> lock_table = std::make_shared<folder::LockTable>();
  std::once_flag lock_probe_once;
  std::atomic<LockMechanism> lock_mechanism{LockMechanism::flock};
  std::mutex heartbeat_mu;
  std::shared_ptr<folder::Heartbeat> heartbeat;  // guarded by heartbeat_mu; started with the first O_EXCL lock

  std::mutex dirs_mu;
  std::vector<std::string> created_dirs;

  // expire_if_due()'s clock.
  std::mutex budget_mu;
  std::chrono::steady_clock::time_point last_expiry_pass;

  // Recorded sizes of entries this process has opened, by inode, so that a repeated hit checks its size with
  // the fstat alone. An inode is only reused after the entry is gone, and a replaced entry has a new inode.
  std::mutex records_mu;
  struct Remembered {
    std::uint64_t size = 0;
    std::size_t key_tag = 0;  // std::hash of the key the inode was checked against
  };
  std::unordered_map<std::uint64_t, Remembered> recorded_sizes;  // (dev ^ ino) hash -> size
  std::atomic<std::uint64_t> hits_for_sampling{0};

  // The filesystem's clock, not this process's: every age in the tier (max_age, stale staging files, orphaned
  // and stale locks) is a file's timestamp, stamped by the filesystem (the kernel, or an NFS server), compared
  // with now(). A host whose clock is an hour or a day off would otherwise sweep live staging files, expire fresh
  // entries, or never take over a dead holder's lock. clock_offset() is the filesystem's time minus this process's,
  // measured by creating a probe file in .locks/ (at most once a minute; zero below k_clock_tolerance, and when
  // the probe cannot be made, e.g. on a read-only tier).
  std::chrono::system_clock::duration clock_offset();
  std::chrono::system_clock::duration measure_clock_offset();  // one probe; called by clock_offset()
  std::chrono::system_clock::time_point now() { return std::chrono::system_clock::now() + clock_offset(); }
  std::mutex clock_mu;                                 // serialises the probes
  std::atomic<std::int64_t> offset_ns{0};              // the last measured offset
  std::atomic<std::int64_t> offset_measured_at_ns{0};  // steady_clock; 0: never measured
  bool read_only = false;

  Result<void> ensure_dir(const std::string& dir);

  std::string instance_dir(const Instance& instance) const { return root + "/" + instance.name(); }
  std::string entry_path(const ShardKey& key) const;
  std::string sidecar_path(const ShardKey& key) const {
    return instance_dir(key.instance) + "/" + key.hash.hex() + folder::k_sidecar_suffix;
  }
  std::string lock_path(const std::string& lock_name) const { return locks_dir + "/" + lock_name + ".lock"; }
};

struct FolderTier::BudgetLock {
  util::UniqueFd fd;       // the tier's evict lock, held (flock) while one entry is committed
  std::string usage_path;  // .locks/.usage: the committed bytes of every process
  std::uint64_t usage = 0;
  ~BudgetLock();
};

}  // namespace datavo
