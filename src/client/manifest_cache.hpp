// The on-disk manifest cache of the origin client (layout at the top of include/datavo/origin_client.hpp).
//
// Thread safety: stateless apart from its root path; every write is an atomic rename, so any number of threads
// and processes may read and write the same directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"

namespace datavo::client {

// What a content hash names, recorded when a client computes a shard key (warm, read, SampleStream), so that
// `datavo cache ls` can say which dataset and shard each entry is (like `hf cache ls`).
struct ShardRecord {
  std::string dataset;
  std::string split;
  std::uint64_t revision = 0;
  std::uint64_t shard_index = 0;
  std::vector<std::string> keys;
};

// The `latest` record: the revision and ETag of the last unpinned manifest answer.
struct LatestRecord {
  std::uint64_t revision = 0;
  std::string etag;
};

class ManifestCache {
 public:
  ManifestCache(std::string root, Instance instance) : root_(std::move(root)), instance_(std::move(instance)) {}

  // The cached manifest of `revision`; nullopt when absent or unreadable (logged).
  std::optional<Manifest> load(const DatasetName& name, std::uint64_t revision) const;
  std::optional<LatestRecord> load_latest(const DatasetName& name) const;

  // Writes the server's manifest body for its revision. REQUIRES: `body` parsed as a Manifest of `name`.
  Result<void> store(const DatasetName& name, std::uint64_t revision, std::string_view body) const;
  Result<void> store_latest(const DatasetName& name, const LatestRecord& record) const;

  // <root>/<instance>/<dataset>/<split>
  std::string directory(const DatasetName& name) const;

  // The shard index: <root>/<instance>/.shards/<content_hash>.json, one small file per content hash, written
  // atomically once (a content hash always names the same shard, so an existing record is left alone).
  Result<void> store_shard(const ContentHash& hash, const ShardRecord& record) const;
  std::optional<ShardRecord> load_shard(const ContentHash& hash) const;
  // Every record of this instance (unreadable files are skipped).
  std::vector<std::pair<ContentHash, ShardRecord>> shards() const;
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  Instance instance_;
};

// $DATAVO_MANIFEST_CACHE_DIR, else $HOME/.cache/altavo/datavo/manifests. invalid_argument when neither is set.
Result<std::string> default_manifest_cache_dir();

// The server identities remembered per URL (the instance_id of GET /v1/instance), so that two URLs of one server
// share one cache and an offline read finds it: <root>/.servers/<the URL, every byte outside [A-Za-z0-9.-] as
// '_'>.json holding {"server": URL, "instance": ID}. The URL is the client's normalized base URL.
std::optional<Instance> load_server_instance(const std::string& root, const std::string& server);
Result<void> store_server_instance(const std::string& root, const std::string& server, const Instance& instance);

}  // namespace datavo::client
