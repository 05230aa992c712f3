#include "datavo/operations.hpp"

namespace datavo {

Result<CacheStatsReport> cache_stats(ShardCacheHierarchy& cache, ResetStats reset) {
  if (reset == ResetStats::yes) {
    for (const auto& tier : cache.tiers()) {
      if (auto* folder = tier->as_folder()) DATAVO_TRY(folder->reset_stats());
    }
  }
  return CacheStatsReport{cache.cache_info()};
}

}  // namespace datavo
