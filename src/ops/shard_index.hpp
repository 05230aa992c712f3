// ShardIndex: what the shard records of the manifest cache (client/manifest_cache.hpp) say the content hashes of
// each instance are, for `cache ls` and `cache rm --dataset`. Opens each instance's records on first use.
//
// Thread safety: one thread at a time (it caches what it opened).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/manifest_cache.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/operations.hpp"

namespace datavo::ops {

class ShardIndex {
 public:
  // `root`: the manifest cache directory; nullopt, the default one (none when it cannot be told: no record then).
  explicit ShardIndex(std::optional<std::string> root);

  // What `hash` of `instance` was recorded as; nullopt when nothing recorded it.
  std::optional<RecordedShard> find(const std::string& instance, const ContentHash& hash);
  // Every record of `instance`.
  std::vector<std::pair<ContentHash, RecordedShard>> all(const Instance& instance);

 private:
  client::ManifestCache* of(const std::string& instance);

  std::string root_;  // empty: no manifest cache
  std::map<std::string, std::unique_ptr<client::ManifestCache>> caches_;
};

}  // namespace datavo::ops
