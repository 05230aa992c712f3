#include <algorithm>
#include <optional>

#include "datavo/operations.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/protocol.hpp"
#include "ops/caller_stop.hpp"
#include "ops/shard_index.hpp"
#include "util/cancel.hpp"

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

RmTierChoice choice_for(const Tier& tier, const CacheRmRequest& request) {
  if (tier.read_only()) return RmTierChoice::read_only;
  switch (request.scope) {
    case RmScope::this_machine: return tier.reach() == TierReach::shared ? RmTierChoice::shared : RmTierChoice::removes;
    case RmScope::named: {
      const bool named = std::find(request.tiers.begin(), request.tiers.end(), tier.name()) != request.tiers.end();
      return named ? RmTierChoice::removes : RmTierChoice::not_named;
    }
    case RmScope::every_tier: return RmTierChoice::removes;
  }
  return RmTierChoice::removes;
}

// A name of RmScope::named that is no writable tier: the error names it and the tiers there are.
std::optional<Error> bad_tier_name(const ShardCacheHierarchy& cache, const std::string& wanted) {
  std::string known;
  for (const auto& tier : cache.tiers()) {
    if (tier->name() == wanted) {
      if (!tier->read_only()) return std::nullopt;
      return Error{ErrorCode::invalid_argument,
                   "cache rm: tier '" + wanted + "' is read-only; nothing is removed from it"};
    }
    known += (known.empty() ? "" : ", ") + tier->name();
  }
  return Error{ErrorCode::invalid_argument, "cache rm: no tier named '" + wanted + "' (the tiers: " + known + ")"};
}

RemovedEntry remove_from(ShardCacheHierarchy& cache, const std::vector<RmTier>& scope, const ShardKey& key,
                         RmReason reason) {
  RemovedEntry entry{key.hash, reason, {}, {}};
  for (std::size_t i = 0; i < cache.tiers().size(); ++i) {
    if (scope[i].choice != RmTierChoice::removes) continue;
    Tier& tier = *cache.tiers()[i];
    auto gone = tier.remove(key);
    if (!gone && util::must_stop()) break;  // a removal cut short by a stop is no failure of the tier
    if (!gone)
      entry.failures.push_back(TierError{tier.name(), std::move(gone).error()});
    else if (*gone)
      entry.removed_from.push_back(tier.name());
  }
  return entry;
}

// "; left alone: the shared tier s3" when a shared tier was out of scope: where a missing entry may still be.
std::string shared_left_alone(const CacheRmReport& report) {
  std::string names;
  for (const auto& tier : report.tiers) {
    if (tier.choice == RmTierChoice::shared) names += (names.empty() ? "" : ", ") + tier.tier;
  }
  if (names.empty()) return "";
  return " (shared tiers left alone: " + names + "; --tier NAME or --all-tiers reaches them)";
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
    return Error{ErrorCode::not_found, what + shared_left_alone(report) + "; nothing to remove"};
  }
  if (request.dataset) {
    bool any = false;
    for (const auto& entry : report.entries)
      any = any || (entry.reason == RmReason::of_dataset && !entry.removed_from.empty());
    if (!any) {
      return Error{ErrorCode::not_found, "no cached entry of dataset " + *request.dataset + " (instance " +
                                             request.instance.name() + ")" + shared_left_alone(report) +
                                             "; nothing to remove"};
    }
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<RmTier>> cache_rm_tiers(const ShardCacheHierarchy& cache, const CacheRmRequest& request) {
  if (request.scope == RmScope::named) {
    if (request.tiers.empty()) return Error{ErrorCode::invalid_argument, "cache rm: no tier named"};
    for (const auto& wanted : request.tiers) {
      if (auto bad = bad_tier_name(cache, wanted)) return std::move(*bad);
    }
  }
  std::vector<RmTier> out;
  for (const auto& tier : cache.tiers()) {
    out.push_back(
        RmTier{tier->name(), std::string(tier->type()), tier->location(), tier->reach(), choice_for(*tier, request)});
  }
  return out;
}

Result<CacheRmReport> cache_rm(ShardCacheHierarchy& cache, const CacheRmRequest& request) {
  if (request.hashes.empty() && !request.dataset)
    return Error{ErrorCode::invalid_argument, "cache rm: give content hashes or a dataset"};
  ops::CallerStop caller(request.stop);
  util::StopScope scope_of_caller(caller.token());
  CacheRmReport report;
  auto scope = cache_rm_tiers(cache, request);
  if (!scope) return std::move(scope).error();
  report.tiers = std::move(*scope);
  std::vector<ContentHash> of_dataset;
  if (request.dataset) {
    auto hashes = hashes_of_dataset(request, *request.dataset);
    if (!hashes) return std::move(hashes).error();
    of_dataset = std::move(*hashes);
  }
  // One entry's removal; nullopt when a stop came first, or cut it short with nothing removed (an entry not
  // reached, rather than one not cached).
  const auto removal = [&](const ContentHash& hash, RmReason reason) -> std::optional<RemovedEntry> {
    if (util::must_stop()) return std::nullopt;
    RemovedEntry entry = remove_from(cache, report.tiers, ShardKey{request.instance, hash}, reason);
    if (util::must_stop() && entry.removed_from.empty()) return std::nullopt;
    return entry;
  };
  for (const auto& hash : request.hashes) {
    auto entry = removal(hash, RmReason::named);
    if (!entry) break;
    if (entry->removed_from.empty()) ++report.not_cached;
    report.entries.push_back(std::move(*entry));
  }
  for (const auto& hash : of_dataset) {
    auto entry = removal(hash, RmReason::of_dataset);
    if (!entry) break;
    // Recorded once, maybe evicted since: an entry no tier held is no entry, and not being cached no failure.
    if (entry->removed_from.empty() && entry->failures.empty()) continue;
    report.entries.push_back(std::move(*entry));
  }
  for (const auto& entry : report.entries) report.removed += entry.removed_from.empty() ? 0 : 1;
  cache.flush_stats();
  // What was removed before the stop stays removed (each removal is whole), and the report says what it was.
  report.error = util::must_stop() ? util::stopped_error("cache rm") : outcome(report, request);
  return report;
}

}  // namespace datavo
