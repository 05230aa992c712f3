// What warm() and plan_warm() begin with: the request checked, its cache and origin client made, the dataset
// resolved (dataset.hpp), in the order that fails bad input before any I/O.
#pragma once

#include <memory>

#include "datavo/dataset.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/origin_client.hpp"
#include "datavo/warm.hpp"

namespace datavo::ops {

struct WarmSetup {
  std::shared_ptr<OriginClient> client;
  std::shared_ptr<ShardCacheHierarchy> cache;
  ResolvedDataset dataset;

  // The cache key of the shard at `position`.
  ShardKey key(std::size_t position) const { return client->shard_key(dataset.manifest, position, dataset.keys); }
};

// Errors: those of dataset.hpp, invalid_argument for jobs 0, and whatever making the cache or the client returns.
Result<WarmSetup> set_up_warm(const WarmRequest& request);

}  // namespace datavo::ops
