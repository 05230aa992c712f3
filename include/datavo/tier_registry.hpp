// The tier registry: from a TierConfig (a tier of shards.yaml) to a Tier, through the one table of tier types
// (src/tier/registry.cpp). The hierarchy a whole configuration describes is built by build_hierarchy()
// (hierarchy.hpp).
//
// Thread safety: functions are reentrant.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/tier.hpp"
#include "datavo/tier_config.hpp"

namespace datavo {

// The registered tier types, in the order shown to users: "folder", "s3", "gcs", "azure_blob".
std::vector<std::string> tier_type_names();

// Every key a tier of type `type` takes in shards.yaml, but `type` itself: the common ones (name, max_bytes,
// read_only), then the type's own in the order of docs/config.md. Empty for a type this build does not know. The
// Python SDK's tier classes take exactly these as arguments (python/tests/test_api.py checks it).
std::vector<std::string> tier_fields(std::string_view type);

// Builds one tier from its config. A type this build does not provide yields `unsupported`; an unknown type
// `config`. Does no I/O.
Result<std::shared_ptr<Tier>> make_tier(const TierConfig& config);
}  // namespace datavo
