// The origin server's request counters, served as GET /v1/metrics (docs/protocol.md): requests by route and
// status, response body bytes by route.
//
// Thread safety: every method may be called from any thread at once.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include "datavo/protocol.hpp"

namespace datavo::origin {

// The routes of the protocol, as the metrics name them.
enum class Route { instance, manifest, ticket, shard, metrics, other };
inline constexpr std::size_t k_route_count = 6;
const char* to_string(Route route);
// The route of a request path: /v1/instance, /v1/datasets/..., /v1/stream-tickets, /v1/shards/..., /v1/metrics,
// anything else `other`.
Route route_of(std::string_view path);

class Metrics {
 public:
  void count_request(Route route, int status);
  void add_bytes(Route route, std::uint64_t bytes);
  // Every (route, status) counted so far, and the bytes of every route (0 included).
  OriginMetrics snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<Route, int>, std::uint64_t> requests_;  // guarded by mu_
  std::array<std::atomic<std::uint64_t>, k_route_count> bytes_{};
};

}  // namespace datavo::origin
