#include "ops/warm_setup.hpp"

namespace datavo::ops {

Result<WarmSetup> set_up_warm(const WarmRequest& request) {
  auto name = parse_dataset_request(request.dataset, request.keys);
  if (!name) return std::move(name).error();
  if (request.jobs == 0) return Error{ErrorCode::invalid_argument, "jobs must be at least 1"};
  if (request.share && (request.share->count == 0 || request.share->index >= request.share->count)) {
    return Error{ErrorCode::invalid_argument, "share " + std::to_string(request.share->index) + "/" +
                                                  std::to_string(request.share->count) +
                                                  ": the member's index must be below the region's count"};
  }
  WarmSetup setup;
  setup.client = request.client;
  if (!setup.client) {
    auto client = OriginClient::create(request.origin);
    if (!client) return std::move(client).error();
    setup.client = std::move(*client);
  }
  setup.cache = request.cache;
  if (!setup.cache) {
    auto cache = get_default_shard_cache(request.cache_config_path);
    if (!cache) return std::move(cache).error();
    setup.cache = std::move(*cache);
  }
  auto dataset = resolve_dataset(*setup.client, *name, request.keys, request.revision);
  if (!dataset) return std::move(dataset).error();
  setup.dataset = std::move(*dataset);
  return setup;
}

}  // namespace datavo::ops
