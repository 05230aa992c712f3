// The tier registry: the one table that maps a `type` in shards.yaml to the code that builds the tier.
#include <array>

#include "datavo/config.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

Result<std::shared_ptr<Tier>> make_folder(const TierConfig& config) {
  const auto& folder = std::get<FolderTierConfig>(config.backend);
  FolderTierOptions options;
  options.path = folder.path;
  options.name = config.name;
  options.max_bytes = config.max_bytes;
  options.max_age = config.max_age;
  options.access = config.access;
  options.durability = folder.durability;
  auto tier = ShardCacheTier::create(std::move(options));
  if (!tier) return std::move(tier).error();
  return std::shared_ptr<Tier>(std::move(*tier));
}

Result<std::shared_ptr<Tier>> not_built(const TierConfig& config) {
  return Error{ErrorCode::unsupported, "tier '" + config.name + "' has type " + config.type +
                                           ", which this build of datavo does not provide yet"};
}

struct TierFactory {
  std::string_view type;
  Result<std::shared_ptr<Tier>> (*make)(const TierConfig&);
};

// Cloud tiers are parsed and validated by the config loader already; their factories land with their backends.
constexpr std::array<TierFactory, 4> k_tier_factories{{
    {"folder", &make_folder},
    {"s3", &not_built},
    {"gcs", &not_built},
    {"azure_blob", &not_built},
}};

}  // namespace

Result<std::shared_ptr<Tier>> make_tier(const TierConfig& config) {
  for (const auto& factory : k_tier_factories) {
    if (factory.type == config.type) return factory.make(config);
  }
  return Error{ErrorCode::config, "unknown tier type '" + config.type + "'"};
}

Result<std::shared_ptr<ShardCacheHierarchy>> build_hierarchy(const CacheConfig& config) {
  std::vector<std::shared_ptr<Tier>> tiers;
  for (const auto& tier_config : config.tiers) {
    auto tier = make_tier(tier_config);
    if (!tier) {
      if (tier.error().code != ErrorCode::unsupported) return std::move(tier).error();
      LOG_WARNING(tier.error().message << "; the tier is skipped");
      continue;
    }
    tiers.push_back(std::move(*tier));
  }
  auto hierarchy = ShardCacheHierarchy::create(std::move(tiers));
  if (!hierarchy && !config.path.empty()) {
    return Error{hierarchy.error().code, config.path + ": " + hierarchy.error().message};
  }
  return hierarchy;
}

Result<std::shared_ptr<ShardCacheHierarchy>> get_default_shard_cache(const std::optional<std::string>& config_path) {
  auto config = resolve_config(config_path);
  if (!config) return std::move(config).error();
  return build_hierarchy(*config);
}

}  // namespace datavo
