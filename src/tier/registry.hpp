// The one table of tier types (src/tier/registry.cpp). Each entry lives beside its backend
// (src/tier/<type>/<type>_type.cpp): its fields, its parser and its factory. Adding a type touches that table and one
// folder. Internal.
#pragma once

#include <any>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datavo/tier.hpp"
#include "datavo/tier_config.hpp"
#include "tier/tier_fields.hpp"

namespace datavo {

// The keys every tier type takes in shards.yaml, before its own (TierType::fields).
inline constexpr std::string_view k_common_tier_fields[] = {"type", "name", "max_bytes", "read_only"};

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
  Result<void> (*parse)(TierFields& fields, TierConfig& config);
  // Builds the tier. Does no I/O.
  Result<std::shared_ptr<Tier>> (*make)(const TierConfig& config);
};

// Every registered type, in the order shown to users.
const std::vector<const TierType*>& tier_types();
// The type called `name`, or nullptr.
const TierType* find_tier_type(std::string_view name);

// The entries, one per backend folder.
const TierType& folder_tier_type();      // src/tier/folder/folder_type.cpp
const TierType& s3_tier_type();          // src/tier/s3/s3_type.cpp
const TierType& gcs_tier_type();         // src/tier/gcs/gcs_type.cpp
const TierType& azure_blob_tier_type();  // src/tier/azure/azure_type.cpp

// The fields every cloud tier shares (CloudTierOptions), parsed once for all three: src/tier/cloud/cloud_fields.cpp.
struct CloudTierOptions;
// The part_size a cloud tier type accepts, and whose limits those are (named in the error of a value outside them,
// e.g. "S3's multipart part limits").
struct PartSizeLimits {
  Bytes min;
  Bytes max;
  Bytes multiple_of{1};
  std::string_view whose;
};
Result<void> parse_cloud_fields(TierFields& fields, const TierConfig& config, const PartSizeLimits& part_size,
                                CloudTierOptions& out);
// The make() of a cloud type: the Options that its parse() stored in config.backend, given the hierarchy's name,
// max_bytes and access, built by `make` (make_s3_tier, ...). `what` names the type in the internal error of a
// config that its parse() did not fill.
template <typename Options>
Result<std::shared_ptr<Tier>> make_cloud_tier(const TierConfig& config, std::string_view what,
                                              Result<std::shared_ptr<Tier>> (*make)(Options)) {
  const auto* parsed = std::any_cast<Options>(&config.backend);
  if (parsed == nullptr) {
    return Error{ErrorCode::internal, "tier '" + config.name + "' has no " + std::string(what) + " options"};
  }
  Options options = *parsed;
  options.remote.name = config.name;
  options.remote.max_bytes = config.max_bytes;
  options.remote.access = config.access;
  return make(std::move(options));
}
// Helpers of the cloud types' name checks.
inline bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool looks_like_ipv4(std::string_view text);
// Why `url` is not an http(s) URL of a host without credentials, a query, whitespace or control characters
// (naming the byte offset of the first); empty when it is one.
std::string endpoint_problem(const std::string& url);

}  // namespace datavo
