// The folder tier's eviction: LRU by mtime down to the low watermark, max_age expiry, the budget kept across
// processes (the room made before each commit), and gc (eviction plus the sweep of leftovers).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "datavo/folder_tier.hpp"
#include "tier/folder/internal.hpp"
#include "tier/folder/scan.hpp"
#include "util/decimal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using util::UniqueFd;

// Expired entries are misses on open() already; the pass that deletes them in bulk runs at most this often.
constexpr std::chrono::seconds k_expiry_pass_interval{60};

}  // namespace

Result<EvictionReport> FolderTier::evict(DryRun dry_run, const ShardKey* keep) {
  EvictionReport report;
  if (read_only()) return report;
  auto scanned = folder::scan_tier(impl_->root, folder::ScanDetail::entries);
  if (!scanned) return std::move(scanned).error();
  auto& entries = scanned->entries;
  std::uint64_t used = scanned->used.count();
  const auto now = impl_->now();  // the filesystem's clock, which stamped the mtimes
  const std::string keep_name = keep ? keep->hash.hex() : std::string();
  const std::string keep_instance = keep ? keep->instance.name() : std::string();

  auto drop = [&](const folder::ScannedEntry& e, bool expired) {
    if (dry_run == DryRun::no) {
      if (::unlink(e.path.c_str()) != 0) return;  // already gone: another process evicted it
      if (e.has_sidecar) ::unlink((e.path.substr(0, e.path.size() - 4) + folder::k_sidecar_suffix).c_str());
      counters().evictions.fetch_add(1, std::memory_order_relaxed);
    }
    ++report.entries_evicted;
    if (expired) ++report.expired;
    report.bytes_freed += e.size;
    used -= std::min<std::uint64_t>(used, e.size.count());
  };
  std::sort(entries.begin(), entries.end(),
            [](const folder::ScannedEntry& a, const folder::ScannedEntry& b) { return a.mtime < b.mtime; });
  std::vector<bool> gone(entries.size(), false);
  if (options_.max_age) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (now - entries[i].mtime <= *options_.max_age) break;  // sorted oldest first
      if (keep && entries[i].hash_hex == keep_name && entries[i].instance == keep_instance) continue;
      drop(entries[i], true);
      gone[i] = true;
    }
  }
  if (options_.max_bytes && used > options_.max_bytes->count()) {
    const auto target = static_cast<std::uint64_t>(double(options_.max_bytes->count()) * options_.low_watermark);
    for (std::size_t i = 0; i < entries.size() && used > target; ++i) {
      if (gone[i]) continue;
      if (keep && entries[i].hash_hex == keep_name && entries[i].instance == keep_instance) continue;
      drop(entries[i], false);
    }
  }
  report.used_after = Bytes{used};
  std::uint64_t entries_after = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!gone[i] && std::filesystem::exists(entries[i].path)) entries_after += entries[i].size.count();
  }
  report.entries_bytes_after = Bytes{entries_after};
  return report;
}

// The budget across processes. Every process committing into a bounded tier takes the tier's evict lock
// (blocking), reads the shared count of committed bytes in .locks/.usage, adds the staging files' bytes (the
// entry about to be committed is one of them), makes room when they would not fit (an eviction pass, which
// rescans and so corrects the count), renames, adds the entry to the count and lets go.
// Commits into one tier are thus serialised, and the committed entries never exceed max_bytes by more than the
// one shard being committed. The count only ever errs high (removals elsewhere do not lower it), which costs an
// early scan, never an overshoot.
FolderTier::BudgetLock::~BudgetLock() = default;

Result<std::unique_ptr<FolderTier::BudgetLock>> FolderTier::reserve() {
  if (!options_.max_bytes) return std::unique_ptr<BudgetLock>{};
  DATAVO_TRY(impl_->ensure_dir(impl_->locks_dir));
  auto lock = std::make_unique<BudgetLock>();
  lock->fd = UniqueFd(::open(impl_->lock_path("evict").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, folder::entry_mode()));
  if (lock->fd.valid()) {
    ::fchmod(lock->fd.get(), folder::entry_mode());  // open(2) applies the umask; group members lock too
    int rc;
    while ((rc = ::flock(lock->fd.get(), LOCK_EX)) != 0 && errno == EINTR) {
    }
    // Without a working flock the count is shared without exclusion: still corrected by every scan.
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
