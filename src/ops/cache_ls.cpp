#include "datavo/operations.hpp"
#include "ops/caller_stop.hpp"
#include "ops/shard_index.hpp"
#include "util/cancel.hpp"

namespace datavo {

CacheLsReport cache_ls(ShardCacheHierarchy& cache, const CacheLsRequest& request) {
  ops::CallerStop caller(request.stop);
  util::StopScope scope(caller.token());
  CacheLsReport report;
  if (request.instance) report.instance = request.instance->name();
  ops::ShardIndex index(request.manifest_cache_dir);
  for (const auto& tier : cache.tiers()) {
    if (util::must_stop()) {
      report.error = util::stopped_error("ls");  // a tier not listed is not one that failed
      break;
    }
    auto entries = tier->list();
    if (!entries && util::must_stop()) {
      report.error = util::stopped_error("ls");
      break;
    }
    TierLsTotal& total = report.tiers.emplace_back(TierLsTotal{tier->name(), 0, Bytes{0}, bool(entries)});
    if (!entries) {
      if (!report.error) report.error = Error{entries.error().code, "cannot list tier '" + tier->name() + "'"};
      report.failures.push_back(TierError{tier->name(), std::move(entries).error()});
      continue;
    }
    for (auto& entry : *entries) {
      if (report.instance && entry.instance != *report.instance) continue;
      report.size += entry.size;
      total.size += entry.size;
      ++total.entries;
      std::optional<RecordedShard> shard = index.find(entry.instance, entry.hash);
      report.entries.push_back(CacheEntry{tier->name(), std::move(entry), std::move(shard)});
    }
  }
  return report;
}

}  // namespace datavo
