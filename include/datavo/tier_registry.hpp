// The tier registry: from a TierConfig (a tier of shards.yaml) to a Tier, through the one table of tier types
// (src/tier/registry.cpp). The hierarchy a whole configuration describes is built by build_hierarchy()
// (hierarchy.hpp).
//
// Thread safety: functions are reentrant.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datavo/tier.hpp"
#include "datavo/tier_config.hpp"

namespace datavo {

// The registered tier types, in the order shown to users: "folder", "s3", "gcs", "azure_blob".
std::vector<std::string> tier_type_names();

// Builds one tier from its config. A type this build does not provide yields `unsupported`; an unknown type
// `config`. Does no I/O.
Result<std::shared_ptr<Tier>> make_tier(const TierConfig& config);
}  // namespace datavo
