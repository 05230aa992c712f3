#include <cstdlib>

#include "datavo/operations.hpp"
#include "datavo/url_fetcher.hpp"

namespace datavo {

Result<CacheInstallReport> cache_fetch(ShardCacheHierarchy& cache, const CacheFetchRequest& request) {
  TransportOptions transport = request.transport;
  auto stall = stall_timeout_from_env();
  if (!stall) return std::move(stall).error();
  if (*stall) transport.stall_timeout = **stall;
  std::optional<std::string> token = request.bearer_token;
  if (!token) {
    if (const char* env = std::getenv("DATAVO_TOKEN"); env != nullptr) token = env;
  }
  if (token && token->empty()) token.reset();
  // With a SHA-256 to check, a download a killed process left half-done can be continued safely.
  const PartialDownload partial =
      request.expected.sha256 ? PartialDownload::continue_verified : PartialDownload::restart;
  auto result =
      cache.get_or_fetch(request.key, make_url_fetcher(request.url, transport, token, partial), request.expected);
  if (!result) return std::move(result).error();
  return CacheInstallReport{request.key.hash, std::move(*result), wait_for_uploads(cache)};
}

}  // namespace datavo
