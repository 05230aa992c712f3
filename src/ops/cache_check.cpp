#include "datavo/operations.hpp"
#include "ops/caller_stop.hpp"
#include "util/cancel.hpp"

namespace datavo {

CacheCheckReport cache_check(ShardCacheHierarchy& cache, const std::atomic<bool>* stop) {
  ops::CallerStop caller(stop);
  util::StopScope scope(caller.token());
  CacheCheckReport report;
  std::size_t unusable = 0;
  for (const auto& tier : cache.tiers()) {
    if (util::must_stop()) break;
    TierCheckReport row{tier->name(), std::string(tier->type()), tier->location(), tier->read_only(), false,
                        tier->check()};
    row.usable = row.read_only ? row.check.readable : row.check.readable && row.check.writable;
    if (!row.usable) ++unusable;
    report.tiers.push_back(std::move(row));
  }
  report.ok = unusable == 0 && !util::must_stop();
  if (util::must_stop()) {
    report.error = util::stopped_error("check");  // the tiers not reached are not in the report
  } else if (!report.ok) {
    report.error = Error{ErrorCode::remote, std::to_string(unusable) + " of " + std::to_string(report.tiers.size()) +
                                                " tiers cannot be read or written (the steps of each say why)"};
  }
  return report;
}

}  // namespace datavo
