#include "datavo/operations.hpp"

namespace datavo {

CacheVerifyReport cache_verify(ShardCacheHierarchy& cache, Repair repair) {
  CacheVerifyReport report;
  report.repair = repair;
  for (const auto& tier : cache.tiers()) {
    FolderTier* folder = tier->as_folder();
    if (folder == nullptr) {
      report.not_verified.push_back(TierNotVerified{
          tier->name(), std::string(tier->type()),
          "not re-hashed here: a remote tier's objects are checked against their recorded SHA-256 on every read, "
          "and a mismatch is never installed"});
      continue;
    }
    auto verified = folder->verify(repair);
    if (!verified) {
      report.error = std::move(verified).error();
      return report;
    }
    report.unrepaired += verified->bad - verified->quarantined;
    report.tiers.push_back(TierVerifyReport{tier->name(), std::move(*verified)});
  }
  if (report.unrepaired > 0) {
    report.error = Error{ErrorCode::integrity, std::to_string(report.unrepaired) +
                                                   " entries do not match their digest; run `datavo cache verify "
                                                   "--repair` to quarantine them"};
  }
  return report;
}

}  // namespace datavo
