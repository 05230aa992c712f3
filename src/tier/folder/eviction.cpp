// The folder tier's eviction: LRU by mtime down to the low watermark, max_age expiry, the budget check after an
// install, and gc (eviction plus the sweep of leftovers).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "datavo/folder_tier.hpp"
#include "tier/folder/internal.hpp"
#include "tier/folder/scan.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using util::UniqueFd;

// How long enforce_budget() trusts its usage estimate before it rescans the tier.
constexpr std::chrono::seconds k_usage_estimate_ttl{2};
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
  return report;
}

void FolderTier::enforce_budget(const ShardKey* just_installed, Bytes installed) {
  if (!options_.max_bytes && !options_.max_age) return;
  const auto now = std::chrono::steady_clock::now();
  {
    // A full scan costs a stat per entry (about 1 s per 100k entries), so installs far under budget skip it:
    // this process's running estimate is trusted for a short while. Other processes' installs are seen at the
    // next scan, so the budget may be overshot by what they install within that window.
    std::lock_guard lock(impl_->budget_mu);
    bool estimate_fresh = impl_->usage_estimate && now - impl_->estimate_time < k_usage_estimate_ttl;
    if (estimate_fresh) *impl_->usage_estimate += installed.count();
    bool under_budget =
        !options_.max_bytes || (estimate_fresh && *impl_->usage_estimate <= options_.max_bytes->count());
    bool expiry_due = options_.max_age && now - impl_->last_expiry_pass >= k_expiry_pass_interval;
    if (under_budget && !expiry_due) return;
  }
  if (options_.max_bytes && !options_.max_age) {
    auto totals = folder::scan_tier(impl_->root, folder::ScanDetail::totals);
    if (totals && totals->used <= *options_.max_bytes) {
      std::lock_guard lock(impl_->budget_mu);
      impl_->usage_estimate = totals->used.count();
      impl_->estimate_time = now;
      return;
    }
  }
  // One evictor at a time per tier; the others skip, since the running pass frees space for everyone.
  if (!impl_->ensure_dir(impl_->locks_dir)) return;
  UniqueFd fd(::open(impl_->lock_path("evict").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, folder::entry_mode()));
  if (fd.valid()) ::fchmod(fd.get(), folder::entry_mode());  // open(2) applies the umask; group members lock too
  if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) return;
  auto report = evict(DryRun::no, just_installed);
  if (!report) {
    counters().errors.fetch_add(1, std::memory_order_relaxed);
    LOG_WARNING("tier '" << name() << "': eviction failed: " << report.error().message);
    return;
  }
  {
    std::lock_guard lock(impl_->budget_mu);
    impl_->usage_estimate = report->used_after.count();
    impl_->estimate_time = now;
    impl_->last_expiry_pass = now;
  }
  if (report->entries_evicted > 0) {
    LOG_INFO("tier '" << name() << "': evicted " << report->entries_evicted << " entries, "
                      << report->bytes_freed.count() << " bytes");
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
