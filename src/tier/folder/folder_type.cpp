// The folder tier's entry in the tier registry: its shards.yaml fields, their parser and its factory.
#include <algorithm>

#include "datavo/folder_tier.hpp"
#include "tier/registry.hpp"

namespace datavo {
namespace {

Result<void> parse_folder(TierFields& fields, TierConfig& config) {
  FolderTierOptions options;
  auto raw = fields.required_string("path");
  if (!raw) return std::move(raw).error();
  auto expanded = expand_path(*raw, fields.env());
  if (!expanded) return fields.fail("path", expanded.error().message);
  if (expanded->empty() || expanded->front() != '/') {
    // A relative path would depend on the working directory of whichever process reads the file.
    return fields.fail("path", "\"" + *expanded + "\" is not an absolute path");
  }
  options.path = std::move(*expanded);
  fields.effective("path", options.path);

  auto durability = fields.choice<Durability>(
      "durability", {{"fsync", Durability::fsync_before_commit}, {"none", Durability::no_sync}},
      Durability::fsync_before_commit);
  if (!durability) return std::move(durability).error();
  options.durability = *durability;
  fields.effective("durability", to_string(options.durability));

  auto max_age = fields.max_age();
  if (!max_age) return std::move(max_age).error();
  options.max_age = *max_age;

  auto resolution = fields.optional_duration("lru_resolution");
  if (!resolution) return std::move(resolution).error();
  options.lru_resolution = resolution->value_or(default_lru_resolution(options.max_age));
  if (options.max_age && *options.lru_resolution >= *options.max_age) {
    // An entry read more often than max_age would otherwise still expire: its hits would never bump it.
    return fields.fail("lru_resolution", "must be less than max_age (" + format_duration(*options.max_age) + ")");
  }
  fields.effective("lru_resolution", format_duration(*options.lru_resolution));

  auto verify = fields.choice<VerifyOnHit>(
      "verify", {{"size", VerifyOnHit::size}, {"full", VerifyOnHit::full}, {"sampled", VerifyOnHit::sampled}},
      VerifyOnHit::size);
  if (!verify) return std::move(verify).error();
  options.verify = *verify;
  fields.effective("verify", to_string(options.verify));
  auto every = fields.optional_integer("verify_sample_every", 1, 1'000'000'000);
  if (!every) return std::move(every).error();
  if (*every) {
    if (options.verify != VerifyOnHit::sampled) {
      return fields.fail("verify_sample_every", "applies to verify: sampled only");
    }
    options.verify_sample_every = **every;
  }
  if (options.verify == VerifyOnHit::sampled) {
    fields.effective("verify_sample_every", std::to_string(options.verify_sample_every));
  }

  if (config.name.empty()) config.name = options.path;
  config.backend = std::move(options);
  return {};
}

Result<std::shared_ptr<Tier>> make_folder(const TierConfig& config) {
  const auto* parsed = std::any_cast<FolderTierOptions>(&config.backend);
  if (parsed == nullptr) return Error{ErrorCode::internal, "tier '" + config.name + "' has no folder options"};
  FolderTierOptions options = *parsed;
  options.name = config.name;
  options.max_bytes = config.max_bytes;
  options.access = config.access;
  auto tier = FolderTier::create(std::move(options));
  if (!tier) return std::move(tier).error();
  return std::shared_ptr<Tier>(std::move(*tier));
}

}  // namespace

const TierType& folder_tier_type() {
  static const TierType type{
      "folder", "a",           {"path", "durability", "max_age", "lru_resolution", "verify", "verify_sample_every"},
      {},       &parse_folder, &make_folder};
  return type;
}

}  // namespace datavo
