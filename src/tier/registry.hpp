// The one table of tier types (src/tier/registry.cpp). Each entry lives beside its backend
// (src/tier/<type>/config.cpp): its fields, its parser and its factory. Adding a type touches that table and one
// folder. Internal.
#pragma once

#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "config/tier_fields.hpp"
#include "datavo/config.hpp"
#include "datavo/tier.hpp"

namespace datavo {

struct TierType {
  std::string_view name;     // the `type` in shards.yaml
  std::string_view article;  // "a" or "an", for messages ("an s3 tier")
  // The keys this type takes beyond the common ones (type, name, max_bytes, read_only).
  std::vector<std::string_view> fields;
  // Keys some other type takes that get a message of their own here (key, why it does not apply; "{a type}"
  // stands for "an s3" and the like).
  std::vector<std::pair<std::string_view, std::string_view>> hints;
  // Fills config.backend (and config.name when it is empty: a default from the location), recording every
  // effective setting in `fields`. The common fields are already in `config`.
  Result<void> (*parse)(config::TierFields& fields, TierConfig& config);
  // Builds the tier. Does no I/O.
  Result<std::shared_ptr<Tier>> (*make)(const TierConfig& config);
};

// Whether `type`'s factory is still a placeholder that refuses every tier (src/tier/cloud/not_built.cpp): such a
// type is left out of the features of `datavo --version`. The commit that lands a backend removes it there.
bool tier_type_is_placeholder(std::string_view type);

// Every registered type, in the order shown to users.
const std::vector<const TierType*>& tier_types();
// The type called `name`, or nullptr.
const TierType* find_tier_type(std::string_view name);

// The entries, one per backend folder.
const TierType& folder_tier_type();      // src/tier/folder/config.cpp
const TierType& s3_tier_type();          // src/tier/s3/config.cpp
const TierType& gcs_tier_type();         // src/tier/gcs/config.cpp
const TierType& azure_blob_tier_type();  // src/tier/azure/config.cpp

// The fields every cloud tier shares (RemoteTierOptions), parsed once for all three: src/tier/cloud/config.cpp.
struct RemoteTierOptions;
inline constexpr std::string_view k_remote_fields[] = {"prefix", "part_size", "concurrency", "upload", "single_flight"};
Result<void> parse_remote_fields(config::TierFields& fields, const TierConfig& config, RemoteTierOptions& out);
// Helpers of the cloud types' name checks.
inline bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool looks_like_ipv4(std::string_view text);
// Why `url` is not an http(s) URL of a host without credentials or a query; empty when it is one.
std::string endpoint_problem(const std::string& url);

// A cloud tier's hint for max_age.
inline constexpr std::pair<std::string_view, std::string_view> k_max_age_hint{
    "max_age",
    "max_age applies to folder tiers only; expire objects of {a type} tier with the bucket's (or "
    "container's) lifecycle rules"};

}  // namespace datavo
