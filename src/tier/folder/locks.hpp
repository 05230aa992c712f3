// Per-shard locks of a folder tier (FolderTier::lock_shard, a LocalTier's ShardLock). Internal to the folder tier.
//
// Two layers, as LevelDB's PosixLockTable: an in-process table in front of the OS-level lock, so that threads of
// one process queue in memory and the OS lock only arbitrates between processes. The OS-level lock is
//   - flock(2) on .locks/<instance>.<hash>.lock, when the tier's probe (probe_lock_mechanism) showed that flock
//     excludes a second open file description. The kernel releases it when the holder dies. Lockers check after
//     locking that the inode they hold is still the one at the path, since a releasing holder unlinks it.
//   - otherwise an O_EXCL lock file holding "<host> <pid> <boot id>", whose mtime is a heartbeat renewed by the
//     holder every stale_age / 4 (a Heartbeat thread per tier). A waiter polls; it takes over at once when the
//     holder is on this host, of this boot and dead, and otherwise when the heartbeat is older than stale_age.
//     The stale file is claimed by renaming it aside (only one waiter wins the rename), then removed.
// Correctness never depends on either: the rename that commits an entry is the commit point.
// Beside the lock, its holder publishes its landing's progress for the processes waiting on it (ShardLock in
// datavo/tier.hpp; progress_record_path()), written only while it holds an OS-level lock.
//
// Thread safety: all functions are thread-safe. A HeldLock has one owner and releases on destruction.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "util/fs.hpp"

namespace datavo::folder {

// The in-process half: one slot per lock name.
struct LockTable {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::string, bool> held;
};

// Renews the mtime of every O_EXCL lock file this process holds in one tier.
class Heartbeat {
 public:
  explicit Heartbeat(std::chrono::milliseconds interval);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  void add(int fd);
  void remove(int fd);

 private:
  void run();
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<int> fds_;  // guarded by mu_
  bool stopping_ = false;
  std::thread thread_;
};

// One held per-shard lock: the in-process slot, and the OS-level lock when the tier has one.
class HeldLock final : public ShardLock {
 public:
  // A lock of `name` in `table`, not taken yet (take_slot()); the OS-level lock file is `path`.
  HeldLock(std::shared_ptr<LockTable> table, std::string name, std::string path);
  // Waits for and takes the in-process slot; cancelled once util::must_stop() (a cancellation, or the calling
  // thread's StopScope token), checked every k_slot_poll while it waits. Call once, first.
  Result<void> take_slot();
  // Releases the OS-level lock (removing its file), then the slot if taken.
  ~HeldLock() override;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

  bool across_processes() const override { return fd_.valid(); }
  // The progress record (progress_record_path(path())): written whole at each call, removed on release.
  void publish_staging(const ShardHandle& staged) override;
  void publish_verified(Bytes prefix, Bytes total) override;
  const std::string& path() const { return path_; }
  // Holds `fd`, the OS-level lock on path() taken by `mechanism`; an exclusive_create lock is renewed by
  // `heartbeat` while held.
  void hold(util::UniqueFd fd, LockMechanism mechanism, std::shared_ptr<Heartbeat> heartbeat = nullptr);

 private:
  std::shared_ptr<LockTable> table_;
  bool slot_taken_ = false;
  std::string name_;
  std::string path_;
  util::UniqueFd fd_;  // invalid when the lock is in-process only
  LockMechanism mechanism_ = LockMechanism::process_only;
  std::shared_ptr<Heartbeat> heartbeat_;  // set for exclusive_create
  // The holder's progress (ShardLock), and the record file it is written to (opened at the first publish).
  void write_progress();
  LandingProgress progress_;
  util::UniqueFd progress_fd_;
};

// The progress record of the lock file at `lock_path`: "<lock_path>.progress" (sweeps of .locks, which take
// "*.lock", leave it alone; its holder removes it). A fixed-size record, rewritten whole with pwrite(2) at offset 0:
// "datavo-progress 1 <host> <pid> <device> <inode> <verified> <total> <checksum>\n<path>\n", zero-padded; the
// checksum (FNV-1a 64 of what precedes it and the path) lets a reader that raced a rewrite see a torn record as
// none.
std::string progress_record_path(const std::string& lock_path);
std::string encode_progress(const LandingProgress& progress);
// nullopt when `record` is not a whole record of this host.
std::optional<LandingProgress> decode_progress(std::string_view record);
// The record's size: room for a path of PATH_MAX bytes.
constexpr std::size_t k_progress_record_size = 4608;

// Whether a flock(2) error means the filesystem does not support it (as opposed to a real failure).
bool is_flock_unsupported(int err);
// "<host> <pid> <boot id>\n": what an O_EXCL lock file holds.
std::string lock_owner_line();
// This boot's id (/proc/sys/kernel/random/boot_id), or "" when it cannot be read.
const std::string& boot_id();

// Probes how `locks_dir` can exclude other processes: creates a probe file, opens it twice (two open file
// descriptions) and takes flock on both. REQUIRES: locks_dir exists.
LockMechanism probe_lock_mechanism(const std::string& locks_dir, std::string* why);

struct ExclusiveLockOptions {
  mode_t mode = 0664;
  std::chrono::seconds stale_age{20};
  // The filesystem's clock minus this process's (FolderTier::Impl::clock_offset()): heartbeats are the
  // filesystem's timestamps, and a waiter whose clock is off must not misjudge their age.
  std::chrono::system_clock::duration clock_offset{};
};
// Takes the O_EXCL lock file at `path`, waiting for its holder as described at the top. Returns the open
// descriptor of the lock file (kept open for the heartbeat), or an Error when the file cannot be created for a
// reason other than being held; cancelled when util::must_stop() while it waits.
Result<util::UniqueFd> acquire_exclusive_lock_file(const std::string& path, const ExclusiveLockOptions& options);
// Removes the lock file at `path` if it is still the one open as `fd`.
void release_exclusive_lock_file(const std::string& path, int fd);

// Takes flock(LOCK_EX) on the lock file at `path` (created with `mode` when missing), waiting for its holder, and
// checks that the inode locked is still the one at the path (a releasing holder unlinks it). The descriptor holds
// the lock. An invalid descriptor when flock cannot be used there, with `unusable` saying why and what happens
// instead (the caller then holds the lock in-process only); an Error when flock fails otherwise; cancelled when
// util::must_stop() while it waits (it polls with LOCK_NB, so that a waiter can stop: a blocking flock cannot be
// interrupted but by a signal).
struct FlockFile {
  util::UniqueFd fd;
  std::string unusable;
};
Result<FlockFile> acquire_flock_file(const std::string& path, mode_t mode);

}  // namespace datavo::folder
