#include "origin/metrics.hpp"

#include <string>

namespace datavo::origin {

const char* to_string(Route route) {
  switch (route) {
    case Route::instance: return "instance";
    case Route::manifest: return "manifest";
    case Route::ticket: return "ticket";
    case Route::shard: return "shard";
    case Route::metrics: return "metrics";
    case Route::other: return "other";
  }
  return "other";
}

Route route_of(std::string_view path) {
  if (path == "/v1/instance") return Route::instance;
  if (path.starts_with("/v1/datasets/")) return Route::manifest;
  if (path == "/v1/stream-tickets") return Route::ticket;
  if (path.starts_with("/v1/shards/")) return Route::shard;
  if (path == "/v1/metrics") return Route::metrics;
  return Route::other;
}

void Metrics::count_request(Route route, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{route, status}];
}

void Metrics::add_bytes(Route route, std::uint64_t bytes) {
  bytes_[static_cast<std::size_t>(route)].fetch_add(bytes, std::memory_order_relaxed);
}

OriginMetrics Metrics::snapshot() const {
  OriginMetrics out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, count] : requests_) out.requests[{to_string(key.first), std::to_string(key.second)}] = count;
  }
  for (std::size_t i = 0; i < k_route_count; ++i)
    out.response_bytes[to_string(static_cast<Route>(i))] = bytes_[i].load(std::memory_order_relaxed);
  return out;
}

}  // namespace datavo::origin
