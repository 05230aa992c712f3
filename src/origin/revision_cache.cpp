#include "origin/revision_cache.hpp"

namespace datavo::origin {
namespace {

// Parsed revisions kept in memory (each holds every sample id of its dataset).
constexpr std::size_t k_revision_cache_entries = 32;

}  // namespace

Manifest manifest_of(const Revision& rev) {
  Manifest manifest{DatasetName{rev.dataset, rev.split}, rev.manifest_ref, rev.revision, rev.keys, {}};
  for (std::size_t i = 0; i < rev.shards.size(); ++i) {
    ManifestShard shard{i, {}};
    for (const auto& sample : rev.shards[i].samples) shard.samples.push_back(sample.id);
    manifest.shards.push_back(std::move(shard));
  }
  return manifest;
}

std::variant<std::shared_ptr<const CachedRevision>, Refusal> RevisionCache::find(
    const std::string& dataset, const std::string& split, std::optional<std::uint64_t> revision) {
  auto latest = store_.latest_revision(dataset, split);
  if (!latest) return store_failure(latest.error());
  if (!*latest) {
    if (store_.has_dataset(dataset))
      return Refusal{404, "unknown split \"" + split + "\" of dataset \"" + dataset + "\""};
    return Refusal{404, "unknown dataset \"" + dataset + "\""};
  }
  if (!revision) revision = **latest;
  const Refusal unknown{404, "unknown revision " + std::to_string(*revision) + " of " + dataset + "/" + split};
  if (*revision > **latest) return unknown;
  const std::string key = dataset + "/" + split + "@" + std::to_string(*revision);
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  auto loaded = store_.load_revision(dataset, split, *revision);
  if (!loaded) return store_failure(loaded.error());
  if (!*loaded) return unknown;
  auto cached = std::make_shared<CachedRevision>();
  cached->revision = std::move(**loaded);
  cached->manifest_json = manifest_of(cached->revision).to_json();
  cached->etag = "\"" + cached->revision.manifest_ref + "." + std::to_string(cached->revision.revision) + "\"";
  std::lock_guard lock(mu_);
  if (cache_.size() >= k_revision_cache_entries) cache_.erase(cache_.begin());
  cache_[key] = cached;
  return std::shared_ptr<const CachedRevision>(cached);
}

}  // namespace datavo::origin
