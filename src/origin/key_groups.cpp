#include "origin/key_groups.hpp"

#include <algorithm>

namespace datavo::origin {

std::optional<ContentHash> key_group_hash(const Revision& revision, std::uint64_t shard_index,
                                          std::span<const std::string> keys) {
  if (shard_index >= revision.shards.size()) return std::nullopt;
  const bool known = std::all_of(keys.begin(), keys.end(), [&](const std::string& key) {
    return std::binary_search(revision.keys.begin(), revision.keys.end(), key);
  });
  if (!known) return std::nullopt;
  ShardIdentity identity{revision.manifest_ref,
                         std::to_string(revision.revision),
                         shard_index,
                         std::vector<std::string>(keys.begin(), keys.end()),
                         {}};
  for (const auto& sample : revision.shards[shard_index].samples) identity.sample_ids.push_back(sample.id);
  return compute_content_hash(identity);
}

std::variant<KeyGroupTar, Refusal> KeyGroups::get(const TicketFields& fields) {
  const auto hash = ContentHash::parse(fields.content_hash).value();
  const auto lock_target = locks_.get(hash.hex());
  std::lock_guard lock(*lock_target);
  auto existing = store_.find_key_group(hash, chunk_size_);
  if (!existing) return store_failure(existing.error());
  if (*existing) return std::move(**existing);

  auto found = revisions_.find(fields.dataset, fields.split, fields.revision);
  if (auto* refusal = std::get_if<Refusal>(&found)) return std::move(*refusal);
  const Revision& rev = std::get<0>(found)->revision;
  if (key_group_hash(rev, fields.shard_index, fields.keys) != hash)
    return Refusal{404, "the shard of this ticket is not in the store"};
  auto made = store_.materialise_key_group(rev, fields.shard_index, fields.keys, hash, chunk_size_);
  if (!made) return store_failure(made.error());
  return std::move(made).value();
}

}  // namespace datavo::origin
