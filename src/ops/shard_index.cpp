#include "ops/shard_index.hpp"

namespace datavo::ops {
namespace {

RecordedShard recorded(client::ShardRecord record) {
  return RecordedShard{std::move(record.dataset), std::move(record.split), record.revision, record.shard_index,
                       std::move(record.keys)};
}

}  // namespace

ShardIndex::ShardIndex(std::optional<std::string> root) {
  if (root) {
    root_ = std::move(*root);
  } else if (auto dir = client::default_manifest_cache_dir()) {
    root_ = std::move(*dir);
  }
}

std::optional<RecordedShard> ShardIndex::find(const std::string& instance, const ContentHash& hash) {
  auto* cache = of(instance);
  if (cache == nullptr) return std::nullopt;
  auto record = cache->load_shard(hash);
  if (!record) return std::nullopt;
  return recorded(std::move(*record));
}

std::vector<std::pair<ContentHash, RecordedShard>> ShardIndex::all(const Instance& instance) {
  std::vector<std::pair<ContentHash, RecordedShard>> out;
  auto* cache = of(instance.name());
  if (cache == nullptr) return out;
  for (auto& [hash, record] : cache->shards()) out.emplace_back(hash, recorded(std::move(record)));
  return out;
}

client::ManifestCache* ShardIndex::of(const std::string& instance) {
  if (root_.empty()) return nullptr;
  auto it = caches_.find(instance);
  if (it == caches_.end()) {
    auto parsed = Instance::parse(instance);
    if (!parsed) return nullptr;  // an entry of a directory no instance can be named after
    it = caches_.emplace(instance, std::make_unique<client::ManifestCache>(root_, *parsed)).first;
  }
  return it->second.get();
}

}  // namespace datavo::ops
