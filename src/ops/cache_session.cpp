#include "datavo/operations.hpp"
#include "datavo/origin_client.hpp"

namespace datavo {

Result<CacheSession> open_cache_session(const CacheSessionOptions& options) {
  CacheSession session;
  auto config = resolve_config(options.config_path);
  if (!config) return std::move(config).error();
  session.config = std::move(*config);
  auto cache = build_hierarchy(session.config);
  if (!cache) return std::move(cache).error();
  session.cache = std::move(*cache);
  auto instance = OriginClient::server_instance(options.instance ? &*options.instance : nullptr);
  if (!instance) return std::move(instance).error();
  session.instance = std::move(*instance);
  return session;
}

std::optional<UploadSummary> wait_for_uploads(ShardCacheHierarchy& cache) {
  // Long enough for a multi-GiB multipart upload on a slow link; a bucket that takes longer is reported as
  // pending rather than holding the command forever.
  constexpr Milliseconds k_bound{10 * 60 * 1000};
  bool remote = false;
  for (const auto& tier : cache.tiers()) remote = remote || tier->as_folder() == nullptr;
  if (!remote) return std::nullopt;
  return cache.flush_uploads(k_bound);
}

}  // namespace datavo
