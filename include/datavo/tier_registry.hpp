// The tier registry: from a TierConfig (a tier of shards.yaml) to a Tier, through the one table of tier types
// (src/tier/registry.cpp), and from a configuration to the hierarchy a read uses.
//
// Thread safety: functions are reentrant.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datavo/config.hpp"
#include "datavo/hierarchy.hpp"

namespace datavo {

// The registered tier types, in the order shown to users: "folder", "s3", "gcs", "azure_blob".
std::vector<std::string> tier_type_names();
// The registered types this build can make tiers of (not the placeholders of backends still to land), for the
// features list of `datavo --version`.
std::vector<std::string> built_tier_type_names();

// Builds one tier from its config. A type this build does not provide yields `unsupported`; an unknown type
// `config`. Does no I/O.
Result<std::shared_ptr<Tier>> make_tier(const TierConfig& config);
// Builds every tier; a tier that cannot be built is skipped with a WARNING unless it is the only folder tier.
Result<std::shared_ptr<ShardCacheHierarchy>> build_hierarchy(const CacheConfig& config);
// resolve_config() + build_hierarchy(): the hierarchy a read would use.
Result<std::shared_ptr<ShardCacheHierarchy>> get_default_shard_cache(
    const std::optional<std::string>& config_path = std::nullopt);

}  // namespace datavo
