#include "datavo/operations.hpp"

namespace datavo {

CacheGcReport cache_gc(ShardCacheHierarchy& cache, DryRun dry_run) {
  CacheGcReport report;
  report.dry_run = dry_run;
  for (const auto& tier : cache.tiers()) {
    FolderTier* folder = tier->as_folder();
    if (folder == nullptr || folder->read_only()) continue;
    auto eviction = folder->gc(dry_run);
    if (!eviction)
      report.failures.push_back(TierError{tier->name(), std::move(eviction).error()});
    else
      report.tiers.push_back(TierGcReport{tier->name(), *eviction});
  }
  cache.flush_stats();
  if (!report.failures.empty()) report.error = Error{ErrorCode::io, "gc failed on at least one tier"};
  return report;
}

}  // namespace datavo
