// The tier registry: the one table that maps a `type` in shards.yaml to its entry (fields, parser, factory), each
// of which lives beside its backend.
#include "tier/registry.hpp"

#include <algorithm>

#include "datavo/tier_registry.hpp"
#include "util/log.hpp"

namespace datavo {

const std::vector<const TierType*>& tier_types() {
  static const std::vector<const TierType*> table = {
      &folder_tier_type(),
      &s3_tier_type(),
      &gcs_tier_type(),
      &azure_blob_tier_type(),
  };
  return table;
}

const TierType* find_tier_type(std::string_view name) {
  for (const TierType* type : tier_types()) {
    if (type->name == name) return type;
  }
  return nullptr;
}

std::vector<std::string> tier_type_names() {
  std::vector<std::string> names;
  for (const TierType* type : tier_types()) names.emplace_back(type->name);
  return names;
}

std::vector<std::string> tier_fields(std::string_view type_name) {
  const TierType* type = find_tier_type(type_name);
  if (type == nullptr) return {};
  std::vector<std::string> fields;
  for (std::string_view field : k_common_tier_fields) {
    if (field != "type") fields.emplace_back(field);
  }
  fields.insert(fields.end(), type->fields.begin(), type->fields.end());
  return fields;
}

Result<std::shared_ptr<Tier>> make_tier(const TierConfig& config) {
  const TierType* type = find_tier_type(config.type);
  if (type == nullptr) return Error{ErrorCode::config, "unknown tier type '" + config.type + "'"};
  return type->make(config);
}

}  // namespace datavo
