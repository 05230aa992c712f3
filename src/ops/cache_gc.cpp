#include <chrono>
#include <optional>
#include <vector>

#include "datavo/operations.hpp"
#include "ops/caller_stop.hpp"
#include "util/cancel.hpp"

namespace datavo {
namespace {

// Deletes the entries older than max_age from `entries`, into `e`. An entry that fails to delete is reported and
// the others are still tried: a gc that stops at the first failure would leave the rest for ever.
void expire_entries(Tier& tier, const std::vector<EntryInfo>& entries, Seconds max_age, DryRun dry_run,
                    EvictionReport& e, CacheGcReport& report) {
  const auto cutoff = std::chrono::system_clock::now() - max_age;
  for (const auto& entry : entries) {
    if (util::must_stop()) break;  // said once, as the report's error
    if (entry.last_access >= cutoff) {
      e.entries_bytes_after += entry.size;
      continue;
    }
    if (dry_run == DryRun::no) {
      auto instance = Instance::parse(entry.instance);
      auto removed = instance ? tier.remove(ShardKey{*instance, entry.hash}) : Result<bool>(instance.error());
      if (!removed) {
        if (util::must_stop()) break;
        report.failures.push_back(TierError{tier.name(), std::move(removed).error()});
        e.entries_bytes_after += entry.size;
        continue;
      }
      if (!*removed) continue;  // gone meanwhile (another machine's gc)
    }
    ++e.expired;
    e.bytes_freed += entry.size;
  }
  e.entries_evicted = e.expired;
  e.used_after = e.entries_bytes_after;
}

// A writable remote tier: what killed processes left in it swept (LeftoverSweeper), then, with a max_age, its
// entries past it deleted. One listing serves both when the tier has a sweeper. A tier that cannot be listed is a
// failure in `report` and a row of zeros; the pass goes on with the next tier.
void collect_remote(Tier& tier, DryRun dry_run, TierGcReport& row, CacheGcReport& report) {
  row.policy = tier.max_age() ? GcPolicy::expire : GcPolicy::lifecycle;
  std::optional<std::vector<EntryInfo>> entries;
  if (LeftoverSweeper* sweeper = tier.sweeper()) {
    auto swept = sweeper->sweep_leftovers(dry_run);
    if (!swept) {
      if (!util::must_stop()) report.failures.push_back(TierError{tier.name(), std::move(swept).error()});
      return;
    }
    for (auto& failure : swept->failures) report.failures.push_back(TierError{tier.name(), std::move(failure)});
    swept->failures.clear();
    entries = std::move(swept->entries);
    swept->entries.clear();
    row.leftovers = std::move(*swept);
  }
  if (!tier.max_age() || util::must_stop()) return;
  if (!entries) {
    auto listed = tier.list();
    if (!listed) {
      report.failures.push_back(TierError{tier.name(), std::move(listed).error()});
      return;
    }
    entries = std::move(*listed);
  }
  expire_entries(tier, *entries, *tier.max_age(), dry_run, row.eviction, report);
}

}  // namespace

const char* to_string(GcPolicy policy) {
  switch (policy) {
    case GcPolicy::evict: return "evict";
    case GcPolicy::expire: return "expire";
    case GcPolicy::lifecycle: return "lifecycle";
    case GcPolicy::read_only: return "read_only";
  }
  return "evict";
}

CacheGcReport cache_gc(ShardCacheHierarchy& cache, DryRun dry_run, const std::atomic<bool>* stop) {
  ops::CallerStop caller(stop);
  util::StopScope scope(caller.token());
  CacheGcReport report;
  report.dry_run = dry_run;
  for (const auto& tier : cache.tiers()) {
    TierGcReport row{tier->name(), std::string(tier->type()), GcPolicy::read_only, tier->max_age(), {}, {}};
    if (tier->read_only()) {
      report.tiers.push_back(std::move(row));
    } else if (FolderTier* folder = tier->as_folder()) {
      auto eviction = folder->gc(dry_run);
      if (!eviction) {
        report.failures.push_back(TierError{tier->name(), std::move(eviction).error()});
        continue;
      }
      row.policy = GcPolicy::evict;
      row.eviction = *eviction;
      report.tiers.push_back(std::move(row));
    } else {
      collect_remote(*tier, dry_run, row, report);
      report.tiers.push_back(std::move(row));
    }
    if (util::must_stop()) break;
  }
  cache.flush_stats();
  if (util::must_stop()) {
    report.error = util::stopped_error("gc");
  } else if (!report.failures.empty()) {
    report.error = Error{ErrorCode::io, "gc failed on at least one tier"};
  }
  return report;
}

}  // namespace datavo
