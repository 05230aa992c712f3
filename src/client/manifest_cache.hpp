// The on-disk manifest cache of the origin client (layout at the top of include/datavo/origin_client.hpp).
//
// Thread safety: stateless apart from its root path; every write is an atomic rename, so any number of threads
// and processes may read and write the same directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "datavo/content_hash.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/result.hpp"

namespace datavo::client {

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
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  Instance instance_;
};

// $DATAVO_MANIFEST_CACHE_DIR, else $HOME/.cache/altavo/datavo/manifests. invalid_argument when neither is set.
Result<std::string> default_manifest_cache_dir();

}  // namespace datavo::client
