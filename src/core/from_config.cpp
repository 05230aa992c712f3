// The hierarchy a configuration describes: each tier built through the tier registry.
#include "datavo/config.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/tier_registry.hpp"
#include "util/log.hpp"

namespace datavo {

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
