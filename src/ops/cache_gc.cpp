#include <chrono>
#include <optional>

#include "datavo/operations.hpp"
#include "ops/caller_stop.hpp"
#include "util/cancel.hpp"

namespace datavo {
namespace {

// The remote tier's expiry: list, then delete what is older than max_age. An entry that fails to delete is
// reported and the others are still tried: a gc that stops at the first failure would leave the rest for ever.
// nullopt when the tier could not be listed (the failure is in `report`).
std::optional<TierGcReport> expire_remote(Tier& tier, Seconds max_age, DryRun dry_run, CacheGcReport& report) {
  TierGcReport out{tier.name(), std::string(tier.type()), GcPolicy::expire, max_age, {}, {}};
  auto entries = tier.list();
  if (!entries) {
    report.failures.push_back(TierError{tier.name(), std::move(entries).error()});
    return std::nullopt;
  }
  const auto cutoff = std::chrono::system_clock::now() - max_age;
  EvictionReport& e = out.eviction;
  for (const auto& entry : *entries) {
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
  return out;
}

// What killed processes left in a remote tier: its failures join the report's, the pass goes on.
void sweep_remote(Tier& tier, LeftoverSweeper& sweeper, DryRun dry_run, TierGcReport& row, CacheGcReport& report) {
  auto swept = sweeper.sweep_leftovers(dry_run);
  if (!swept) {
    if (!util::must_stop()) report.failures.push_back(TierError{tier.name(), std::move(swept).error()});
    return;
  }
  for (auto& failure : swept->failures) report.failures.push_back(TierError{tier.name(), std::move(failure)});
  swept->failures.clear();
  row.leftovers = std::move(*swept);
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
      row.policy = tier->max_age() ? GcPolicy::expire : GcPolicy::lifecycle;
      auto expired = tier->max_age() ? expire_remote(*tier, *tier->max_age(), dry_run, report) : row;
      if (expired) row = std::move(*expired);
      // A tier that could not be listed is not listed a second time for its leftovers.
      LeftoverSweeper* sweeper = tier->sweeper();
      if (expired && sweeper != nullptr && !util::must_stop()) sweep_remote(*tier, *sweeper, dry_run, row, report);
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
