#include "datavo/operations.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/protocol.hpp"
#include "ops/shard_index.hpp"

namespace datavo {
namespace {

// The content hashes recorded for `dataset` ("<dataset>/<split>", or "<dataset>" for every split).
Result<std::vector<ContentHash>> hashes_of_dataset(const CacheRmRequest& request, const std::string& dataset) {
  if (dataset.find('/') == std::string::npos) {
    DATAVO_TRY(protocol::validate_name("dataset", dataset));
  } else {
    auto name = DatasetName::parse(dataset);
    if (!name) return std::move(name).error();
  }
  ops::ShardIndex index(request.manifest_cache_dir);
  std::vector<ContentHash> out;
  for (auto& [hash, record] : index.all(request.instance)) {
    if (record.dataset + "/" + record.split == dataset || record.dataset == dataset) out.push_back(hash);
  }
  return out;
}

RemovedEntry remove_everywhere(ShardCacheHierarchy& cache, const ShardKey& key, RmReason reason) {
  RemovedEntry entry{key.hash, reason, {}, {}};
  for (const auto& tier : cache.tiers()) {
    if (tier->read_only()) continue;
    auto gone = tier->remove(key);
    if (!gone)
      entry.failures.push_back(TierError{tier->name(), std::move(gone).error()});
    else if (*gone)
      entry.removed_from.push_back(tier->name());
  }
  return entry;
}

// The error that sums up a removal: a tier failed, or something named was not there to remove.
std::optional<Error> outcome(const CacheRmReport& report, const CacheRmRequest& request) {
  for (const auto& entry : report.entries) {
    if (!entry.failures.empty()) {
      return Error{entry.failures.front().error.code, "could not remove " + entry.hash.hex() + " from every tier"};
    }
  }
  const std::size_t named = request.hashes.size();
  if (report.not_cached > 0) {
    const std::string what =
        named == 1 ? request.hashes.front().hex() + " is not cached"
                   : std::to_string(report.not_cached) + " of " + std::to_string(named) + " entries are not cached";
    return Error{ErrorCode::not_found, what + "; nothing to remove"};
  }
  if (request.dataset) {
    bool any = false;
    for (const auto& entry : report.entries)
      any = any || (entry.reason == RmReason::of_dataset && !entry.removed_from.empty());
    if (!any) {
      return Error{ErrorCode::not_found, "no cached entry of dataset " + *request.dataset + " (instance " +
                                             request.instance.name() + "); nothing to remove"};
    }
  }
  return std::nullopt;
}

}  // namespace

Result<CacheRmReport> cache_rm(ShardCacheHierarchy& cache, const CacheRmRequest& request) {
  if (request.hashes.empty() && !request.dataset)
    return Error{ErrorCode::invalid_argument, "cache rm: give content hashes or a dataset"};
  std::vector<ContentHash> of_dataset;
  if (request.dataset) {
    auto hashes = hashes_of_dataset(request, *request.dataset);
    if (!hashes) return std::move(hashes).error();
    of_dataset = std::move(*hashes);
  }
  CacheRmReport report;
  for (const auto& hash : request.hashes) {
    RemovedEntry entry = remove_everywhere(cache, ShardKey{request.instance, hash}, RmReason::named);
    if (entry.removed_from.empty()) ++report.not_cached;
    report.entries.push_back(std::move(entry));
  }
  for (const auto& hash : of_dataset) {
    RemovedEntry entry = remove_everywhere(cache, ShardKey{request.instance, hash}, RmReason::of_dataset);
    // Recorded once, maybe evicted since: an entry no tier held is no entry, and not being cached no failure.
    if (entry.removed_from.empty() && entry.failures.empty()) continue;
    report.entries.push_back(std::move(entry));
  }
  for (const auto& entry : report.entries) report.removed += entry.removed_from.empty() ? 0 : 1;
  cache.flush_stats();
  report.error = outcome(report, request);
  return report;
}

}  // namespace datavo
