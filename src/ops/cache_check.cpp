#include "datavo/operations.hpp"

namespace datavo {

CacheCheckReport cache_check(ShardCacheHierarchy& cache) {
  CacheCheckReport report;
  std::size_t unusable = 0;
  for (const auto& tier : cache.tiers()) {
    TierCheckReport row{tier->name(), std::string(tier->type()), tier->location(), tier->read_only(), false,
                        tier->check()};
    row.usable = row.read_only ? row.check.readable : row.check.readable && row.check.writable;
    if (!row.usable) ++unusable;
    report.tiers.push_back(std::move(row));
  }
  report.ok = unusable == 0;
  if (!report.ok) {
    report.error = Error{ErrorCode::remote, std::to_string(unusable) + " of " + std::to_string(report.tiers.size()) +
                                                " tiers cannot be read or written (the steps of each say why)"};
  }
  return report;
}

}  // namespace datavo
