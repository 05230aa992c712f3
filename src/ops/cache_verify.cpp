#include "datavo/operations.hpp"
#include "ops/caller_stop.hpp"
#include "util/cancel.hpp"

namespace datavo {
namespace {

// Checks one cloud tier's objects into a row of `report`.
void verify_objects(Tier& tier, ObjectVerifier& verifier, Repair repair, VerifyDepth depth, CacheVerifyReport& report) {
  TierObjectVerifyReport row{tier.name(), std::string(tier.type()), tier.read_only(), {}, std::nullopt};
  row.verify.depth = depth;
  auto verified = verifier.verify_objects(depth, repair);
  if (verified) {
    row.verify = std::move(*verified);
    report.unrepaired += row.verify.bad - row.verify.removed;
    report.metadata_only += row.verify.metadata_only;
  } else {
    row.error = std::move(verified).error();
  }
  report.objects.push_back(std::move(row));
}

std::optional<Error> summary_error(const CacheVerifyReport& report) {
  std::size_t failed = 0;
  const TierObjectVerifyReport* first = nullptr;
  for (const auto& row : report.objects) {
    if (!row.error) continue;
    if (++failed == 1) first = &row;
  }
  if (first != nullptr) {
    return Error{first->error->code, "tier '" + first->tier + "' could not be verified: " + first->error->message +
                                         (failed > 1 ? " (and " + std::to_string(failed - 1) + " more tiers)" : "")};
  }
  if (report.unrepaired > 0) {
    return Error{ErrorCode::integrity,
                 std::to_string(report.unrepaired) +
                     " entries do not match their digest; run `datavo cache verify --repair` to quarantine them "
                     "(folder tiers) or delete them (writable cloud tiers)"};
  }
  return std::nullopt;
}

}  // namespace

CacheVerifyReport cache_verify(ShardCacheHierarchy& cache, Repair repair, VerifyDepth depth,
                               const std::atomic<bool>* stop) {
  ops::CallerStop caller(stop);
  util::StopScope scope(caller.token());
  CacheVerifyReport report;
  report.repair = repair;
  report.depth = depth;
  for (const auto& tier : cache.tiers()) {
    if (util::must_stop()) {
      report.error = util::stopped_error("verify");
      return report;
    }
    if (ObjectVerifier* verifier = tier->verifier()) {
      verify_objects(*tier, *verifier, repair, depth, report);
      continue;
    }
    FolderTier* folder = tier->as_folder();
    if (folder == nullptr) {
      report.not_verified.push_back(TierNotVerified{
          tier->name(), std::string(tier->type()),
          "this tier type offers no verification: its entries are checked against their recorded SHA-256 on every "
          "read, and a mismatch is never installed"});
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
  report.error = summary_error(report);
  return report;
}

}  // namespace datavo
