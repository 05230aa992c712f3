// The manifest of a dataset revision (docs/protocol.md, "GET /v1/datasets/<dataset>/<split>/manifest").
#include <algorithm>
#include <functional>
#include <set>

#include "datavo/protocol.hpp"
#include "protocol/json_fields.hpp"

namespace datavo {
namespace {

constexpr std::string_view k_manifest_context = "malformed manifest: ";

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

bool sorted_and_unique(const std::vector<std::string>& items) {
  return std::adjacent_find(items.begin(), items.end(), std::greater_equal<>()) == items.end();
}

Result<void> read_name(const protocol::JsonFields& fields, Manifest& manifest) {
  for (auto [field, out] : {std::pair{"dataset", &manifest.name.dataset}, std::pair{"split", &manifest.name.split}}) {
    auto text = fields.string(field);
    if (!text) return std::move(text).error();
    if (auto valid = protocol::validate_name(field, *text); !valid)
      return fields.refuse(field, "is invalid: " + valid.error().message);
    *out = std::move(*text);
  }
  return ok();
}

Result<void> read_keys(const protocol::JsonFields& fields, Manifest& manifest) {
  auto keys = fields.array("keys");
  if (!keys) return std::move(keys).error();
  DATAVO_TRY(fields.strings("keys", **keys, manifest.keys));
  for (std::size_t i = 0; i < manifest.keys.size(); ++i) {
    if (auto valid = protocol::validate_name("key", manifest.keys[i]); !valid)
      return fields.refuse("keys[" + std::to_string(i) + "]", "is invalid: " + valid.error().message);
  }
  if (!sorted_and_unique(manifest.keys)) return fields.refuse("keys", "are not sorted and unique");
  return ok();
}

Result<ManifestShard> read_shard(const protocol::JsonFields& fields, std::size_t position, const nlohmann::json& json) {
  const std::string where = "shards[" + std::to_string(position) + "]";
  if (!json.is_object()) return fields.refuse(where, "is not an object");
  const protocol::JsonFields shard_fields = fields.nested(json, where + ".");
  ManifestShard shard;
  auto index = shard_fields.unsigned_number("index");
  if (!index) return std::move(index).error();
  shard.index = *index;
  auto samples = shard_fields.array("samples");
  if (!samples) return std::move(samples).error();
  DATAVO_TRY(shard_fields.strings("samples", **samples, shard.samples));
  for (std::size_t i = 0; i < shard.samples.size(); ++i) {
    if (shard.samples[i].empty()) return shard_fields.refuse("samples[" + std::to_string(i) + "]", "is empty");
  }
  return shard;
}

Result<void> read_shards(const protocol::JsonFields& fields, Manifest& manifest) {
  auto shards = fields.array("shards");
  if (!shards) return std::move(shards).error();
  std::set<std::uint64_t> seen;
  for (const auto& json : **shards) {
    const std::size_t position = manifest.shards.size();
    auto shard = read_shard(fields, position, json);
    if (!shard) return std::move(shard).error();
    if (!seen.insert(shard->index).second)
      return fields.refuse("shards[" + std::to_string(position) + "].index", std::to_string(shard->index) + " repeats");
    manifest.shards.push_back(std::move(*shard));
  }
  return ok();
}

}  // namespace

Result<Manifest> Manifest::parse(std::string_view json_text) {
  auto json = protocol::parse_object(json_text, ErrorCode::integrity, k_manifest_context);
  if (!json) return std::move(json).error();
  const protocol::JsonFields fields(*json, ErrorCode::integrity, std::string(k_manifest_context));
  Manifest manifest;
  DATAVO_TRY(read_name(fields, manifest));
  auto ref = fields.non_empty_string("manifest_ref");
  if (!ref) return std::move(ref).error();
  manifest.manifest_ref = std::move(*ref);
  auto revision = fields.positive_number("revision");
  if (!revision) return std::move(revision).error();
  manifest.revision = *revision;
  DATAVO_TRY(read_keys(fields, manifest));
  DATAVO_TRY(read_shards(fields, manifest));
  return manifest;
}

std::string Manifest::to_json() const {
  nlohmann::json shard_list = nlohmann::json::array();
  for (const auto& shard : shards) shard_list.push_back({{"index", shard.index}, {"samples", shard.samples}});
  const nlohmann::json body = {{"dataset", name.dataset}, {"split", name.split}, {"manifest_ref", manifest_ref},
                               {"revision", revision},    {"keys", keys},        {"shards", std::move(shard_list)}};
  return protocol::dump(body);
}

ShardIdentity Manifest::identity(std::size_t position, const std::vector<std::string>& group) const {
  const ManifestShard& shard = shards.at(position);
  return ShardIdentity{manifest_ref, std::to_string(revision), shard.index, group, shard.samples};
}

Result<std::vector<std::string>> Manifest::normalize_keys(std::vector<std::string> group) const {
  if (group.empty())
    return Error{ErrorCode::invalid_argument, "no key given: name at least one (e.g. --key audio.wav)"};
  std::sort(group.begin(), group.end());
  group.erase(std::unique(group.begin(), group.end()), group.end());
  for (const auto& key : group) {
    if (!std::binary_search(keys.begin(), keys.end(), key)) {
      return Error{ErrorCode::invalid_argument, "key '" + key + "' is not in " + name.full() + " revision " +
                                                    std::to_string(revision) + " (its keys: " + join(keys, ", ") + ")"};
    }
  }
  return group;
}

}  // namespace datavo
