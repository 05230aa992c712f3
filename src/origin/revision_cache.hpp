// The revisions the origin server answers from: each read from the store once, with the manifest JSON and ETag
// the protocol serves for it (docs/protocol.md, "GET /v1/datasets/<dataset>/<split>/manifest").
//
// Thread safety: find() may be called from any thread at once. The Store must outlive the cache.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "datavo/protocol.hpp"
#include "origin/responses.hpp"
#include "origin/store.hpp"

namespace datavo::origin {

struct CachedRevision {
  Revision revision;
  std::string manifest_json;  // manifest_of(revision).to_json()
  std::string etag;           // "\"<manifest_ref>.<revision>\""
};

// The protocol's manifest of a store revision: its names, keys and the sample ids of each shard.
Manifest manifest_of(const Revision& revision);

class RevisionCache {
 public:
  explicit RevisionCache(const Store& store) : store_(store) {}

  // Revision `revision` (nullopt: LATEST) of a dataset, or the refusal: 404 naming the unknown dataset, split or
  // revision (a revision above LATEST is unknown: a pack that crashed before publishing it left it), 500 when the
  // store fails. REQUIRES: validated names.
  std::variant<std::shared_ptr<const CachedRevision>, Refusal> find(const std::string& dataset,
                                                                    const std::string& split,
                                                                    std::optional<std::uint64_t> revision);

 private:
  const Store& store_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const CachedRevision>> cache_;  // "<dataset>/<split>@<R>"; guarded by mu_
};

}  // namespace datavo::origin
