// The folder tier's eviction: LRU by mtime down to the low watermark, max_age expiry, the budget kept across
// processes (the room made before each commit), and gc (eviction plus the sweep of leftovers).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include "datavo/folder_tier.hpp"
#include "tier/folder/internal.hpp"
#include "tier/folder/oldest_entries.hpp"
#include "tier/folder/scan.hpp"
#include "util/decimal.hpp"
#include "util/flock.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using util::UniqueFd;

// Expired entries are misses on open() already; the pass that deletes them in bulk runs at most this often.
constexpr std::chrono::seconds k_expiry_pass_interval{60};

// One pass of evict(): the policy's predicates and the running totals of its report.
struct Pass {
  const std::string& root;
  DryRun dry_run;
  const ShardKey* keep;
  std::optional<std::chrono::system_clock::time_point> expiry_cutoff;  // older than this is expired
  std::atomic<std::uint64_t>& evictions;                               // the tier's counter
  EvictionReport report;
  std::uint64_t used = 0;         // the tier's bytes, less what the pass removed (or would remove, dry)
  std::uint64_t entry_bytes = 0;  // the committed entries' bytes left (as EvictionReport::entries_bytes_after)

  bool is_keep(std::string_view instance, std::string_view hash_hex) const {
    return keep && hash_hex == keep->hash.hex() && instance == keep->instance.name();
  }
  bool expired(const folder::EntryVisit& e) const { return expiry_cutoff && e.mtime < *expiry_cutoff; }
  bool may_evict(const folder::EntryVisit& e) const { return !expired(e) && !is_keep(e.instance, e.hash_hex); }

  // Removes an entry (unless dry) and its sidecar: `entry` is a path relative to `dir_fd`, or absolute.
  // false when it was gone already: another process evicted it. The sidecar may be absent: the walk does not
  // match sidecars to entries, and a failed unlink of a missing one costs one lookup per evicted entry.
  bool remove(int dir_fd, const std::string& entry, Bytes size) {
    if (dry_run == DryRun::no) {
      if (::unlinkat(dir_fd, entry.c_str(), 0) != 0) {
        if (errno == ENOENT) entry_bytes -= std::min(entry_bytes, size.count());
        return false;
      }
      const std::string sidecar = entry.substr(0, entry.size() - std::strlen(folder::k_entry_suffix));
      ::unlinkat(dir_fd, (sidecar + folder::k_sidecar_suffix).c_str(), 0);
      evictions.fetch_add(1, std::memory_order_relaxed);
      entry_bytes -= std::min(entry_bytes, size.count());
    }
    ++report.entries_evicted;
    report.bytes_freed += size;
    used -= std::min(used, size.count());
    return true;
  }

  // max_age: expired entries go as they are listed, nothing is held for them.
  void visit_expiring(const folder::EntryVisit& e) {
    entry_bytes += e.size.count();
    if (!expired(e) || is_keep(e.instance, e.hash_hex)) return;
    if (remove(e.dir_fd, std::string(e.name), e.size)) {
      ++report.expired;
      // A dry run leaves the expired entries in place but does not count them as left (nor does a real one).
      if (dry_run == DryRun::yes) entry_bytes -= std::min(entry_bytes, e.size.count());
    }
  }

  // LRU: the entries held, oldest first, until the usage is down to `target`.
  void evict_oldest(folder::OldestEntries& oldest, std::uint64_t target) {
    for (const folder::OldEntry& e : oldest.take_oldest_first()) {
      if (used <= target) break;
      const std::string hex = folder::OldestEntries::hash_hex(e);
      // An entry gone meanwhile is not replaced by the next oldest (the heap holds no more): another process
      // evicted it, so the tier is smaller than `used` says by its size.
      remove(AT_FDCWD, root + "/" + oldest.instance_name(e) + "/" + hex + folder::k_entry_suffix, Bytes{e.size});
    }
  }
};

}  // namespace

// Two streaming passes, so that the memory does not grow with the tier (a pass over 10 million entries that held
// them all took gigabytes). The first sums the usage and removes expired entries as it meets them; the bytes to
// free are known only at its end. Only when the tier is over max_bytes does a second pass collect the LRU
// candidates, in a heap bounded by those bytes (folder/oldest_entries.hpp). One pass with a heap sized by an
// estimate was the other way; no estimate is reliable (the shared usage count errs either way when other
// configurations write the tier) and the second listing is served from the dentry and inode caches the first warmed.
Result<EvictionReport> FolderTier::evict(DryRun dry_run, const ShardKey* keep) {
  if (read_only()) return EvictionReport{};
  Pass pass{impl_->root, dry_run, keep, std::nullopt, counters().evictions, {}};
  // The filesystem's clock, which stamped the mtimes.
  if (options_.max_age) pass.expiry_cutoff = impl_->now() - *options_.max_age;
  auto listed = folder::walk_tier(impl_->root, [&pass](const folder::EntryVisit& e) { pass.visit_expiring(e); });
  if (!listed) return std::move(listed).error();
  // What the expiry removed was subtracted from entry_bytes as it went, not yet from used.
  pass.used = listed->used.count() - std::min(listed->used.count(), pass.report.bytes_freed.count());
  if (options_.max_bytes && pass.used > options_.max_bytes->count()) {
    const auto target = static_cast<std::uint64_t>(double(options_.max_bytes->count()) * options_.low_watermark);
    folder::OldestEntries oldest(Bytes{pass.used - target});
    auto again = folder::walk_tier(impl_->root, [&pass, &oldest](const folder::EntryVisit& e) {
      if (pass.may_evict(e)) oldest.offer(e.instance, e.hash_hex, e.size, e.mtime);
    });
    if (!again) return std::move(again).error();
    pass.evict_oldest(oldest, target);
  }
  pass.report.used_after = Bytes{pass.used};
  pass.report.entries_bytes_after = Bytes{pass.entry_bytes};
  return pass.report;
}

// The budget across processes. Every process committing into a bounded tier takes the tier's evict lock
// (waiting for it as for a shard lock: a stopped or cancelled committer leaves the wait with cancelled), reads the
// shared count of committed bytes in .locks/.usage, adds the staging files' bytes (the entry about to be committed is
// one of them), makes room when they would not fit (an eviction pass, which rescans and so corrects the count),
// renames, adds the entry to the count and lets go. Commits into one tier are thus serialised, and the committed
// entries never exceed max_bytes by more than the one shard being committed. The count only ever errs high (removals
// elsewhere do not lower it), which costs an early scan, never an overshoot.
FolderTier::BudgetLock::~BudgetLock() = default;

Result<std::unique_ptr<FolderTier::BudgetLock>> FolderTier::reserve() {
  if (!options_.max_bytes) return std::unique_ptr<BudgetLock>{};
  DATAVO_TRY(impl_->ensure_dir(impl_->locks_dir));
  auto lock = std::make_unique<BudgetLock>();
  lock->fd = UniqueFd(::open(impl_->lock_path("evict").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, folder::entry_mode()));
  if (lock->fd.valid()) {
    ::fchmod(lock->fd.get(), folder::entry_mode());  // open(2) applies the umask; group members lock too
    // Without a working flock the count is shared without exclusion: still corrected by every scan.
    if (auto locked = util::flock_exclusive(lock->fd.get(), impl_->lock_path("evict")); !locked) {
      if (locked.error().code == ErrorCode::cancelled) return std::move(locked).error();
    }
  }
  lock->usage_path = impl_->locks_dir + "/.usage";
  std::optional<std::uint64_t> usage;
  if (auto text = util::read_file(lock->usage_path, std::size_t{64}); text && text->ends_with('\n')) {
    usage = util::parse_decimal(std::string_view(*text).substr(0, text->size() - 1));
  }
  // The budget covers the staging files too (the entry about to be committed is one of them): a readdir of
  // .staging/, which holds a file per download under way.
  auto staging = folder::directory_bytes(impl_->staging_dir);
  if (!usage || !staging || *usage + staging->count() > options_.max_bytes->count()) {
    // Over budget, or the count is unknown: a pass rescans the tier and evicts to the low watermark.
    auto report = evict(DryRun::no, nullptr);
    if (!report) {
      counters().errors.fetch_add(1, std::memory_order_relaxed);
      LOG_WARNING("tier '" << name() << "': eviction failed: " << report.error().message);
    } else {
      usage = report->entries_bytes_after.count();
      if (report->entries_evicted > 0) {
        LOG_INFO("tier '" << name() << "': evicted " << report->entries_evicted << " entries, "
                          << report->bytes_freed.count() << " bytes");
      }
    }
  }
  lock->usage = usage.value_or(0);
  return lock;
}

void FolderTier::committed(BudgetLock* lock, Bytes size) {
  if (lock == nullptr) return;
  const std::string text = std::to_string(lock->usage + size.count()) + "\n";
  // Best effort and unsynced, like the stats: a lost or torn count is rescanned at the next commit.
  (void)util::write_file_atomic(lock->usage_path, text, folder::entry_mode(), util::Sync::no,
                                folder::k_entry_group_bits);
}

void FolderTier::expire_if_due(const ShardKey& just_committed) {
  if (!options_.max_age) return;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(impl_->budget_mu);
    if (now - impl_->last_expiry_pass < k_expiry_pass_interval) return;
    impl_->last_expiry_pass = now;
  }
  if (!impl_->ensure_dir(impl_->locks_dir)) return;
  UniqueFd fd(::open(impl_->lock_path("evict").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, folder::entry_mode()));
  if (fd.valid()) ::fchmod(fd.get(), folder::entry_mode());
  // Another process holding the lock is evicting already: its pass expires entries too.
  if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) return;
  // The entry just committed may carry an old mtime (its bytes were written long ago): never expired by its own
  // commit.
  auto report = evict(DryRun::no, &just_committed);
  if (!report) {
    counters().errors.fetch_add(1, std::memory_order_relaxed);
    LOG_WARNING("tier '" << name() << "': expiry failed: " << report.error().message);
  }
}

Result<EvictionReport> FolderTier::gc(DryRun dry_run) {
  if (read_only()) return EvictionReport{};
  auto report = evict(dry_run, nullptr);
  if (!report) return report;
  auto swept = folder::sweep_leftovers(impl_->staging_dir, impl_->locks_dir, options_.stale_staging_age,
                                       folder::k_orphan_lock_age, impl_->now(), dry_run == DryRun::yes);
  if (!swept) return std::move(swept).error();
  report->staging_swept = swept->staging_files;
  report->locks_swept = swept->lock_files;
  return report;
}

}  // namespace datavo
