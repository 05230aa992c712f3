// The server's request counters (src/origin/metrics.cpp): routes of paths, snapshots, and /v1/metrics over HTTP.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "origin/metrics.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "unit/origin/server_fixture.hpp"

namespace datavo {
namespace {

using namespace origintest;

class OriginMetricsTest : public ServerTest {};

TEST_F(OriginMetricsTest, MetricsCountRequestsByRouteAndStatusAndShardBytesSent) {
  start();
  manifest();
  manifest();
  get("/v1/datasets/voice/nope/manifest");
  json t = ticket(1, 0, {"audio.wav"});
  const std::string full = download(t);
  auto part = get(t["url"], {"Range: bytes=3-12"});
  ASSERT_EQ(part.body.size(), 10u);

  auto r = get("/v1/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.header("content-type").find("text/plain"), std::string::npos);
  for (const std::string& line : {
           std::string("datavo_requests_total{route=\"manifest\",status=\"200\"} 2\n"),
           std::string("datavo_requests_total{route=\"manifest\",status=\"404\"} 1\n"),
           std::string("datavo_requests_total{route=\"ticket\",status=\"200\"} 1\n"),
           std::string("datavo_requests_total{route=\"shard\",status=\"200\"} 1\n"),
           std::string("datavo_requests_total{route=\"shard\",status=\"206\"} 1\n"),
           "datavo_response_bytes_total{route=\"shard\"} " + std::to_string(full.size() + 10) + "\n",
       }) {
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "in:\n" << r.body;
  }
  auto again = get("/v1/metrics");
  EXPECT_NE(again.body.find("datavo_requests_total{route=\"metrics\",status=\"200\"} 1\n"), std::string::npos);
}

TEST(OriginMetrics, RoutesOfPaths) {
  EXPECT_EQ(origin::route_of("/v1/instance"), origin::Route::instance);
  EXPECT_EQ(origin::route_of("/v1/datasets/a/b/manifest"), origin::Route::manifest);
  EXPECT_EQ(origin::route_of("/v1/stream-tickets"), origin::Route::ticket);
  EXPECT_EQ(origin::route_of("/v1/shards/x.tar"), origin::Route::shard);
  EXPECT_EQ(origin::route_of("/v1/metrics"), origin::Route::metrics);
  EXPECT_EQ(origin::route_of("/v1/instance/x"), origin::Route::other);
  EXPECT_EQ(origin::route_of("/"), origin::Route::other);
}

TEST(OriginMetrics, ASnapshotHasEveryRoutesBytesAndReadsBackAsItself) {
  origin::Metrics metrics;
  metrics.count_request(origin::Route::manifest, 200);
  metrics.count_request(origin::Route::manifest, 200);
  metrics.count_request(origin::Route::shard, 206);
  metrics.add_bytes(origin::Route::shard, 1000);
  const OriginMetrics snapshot = metrics.snapshot();
  EXPECT_EQ(snapshot.requests_for("manifest", "200"), 2u);
  EXPECT_EQ(snapshot.requests_for("shard"), 1u);
  EXPECT_EQ(snapshot.response_bytes.size(), origin::k_route_count);
  EXPECT_EQ(snapshot.response_bytes.at("shard"), 1000u);
  EXPECT_EQ(snapshot.response_bytes.at("other"), 0u);
  auto parsed = OriginMetrics::parse(snapshot.to_text());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, snapshot);
}

}  // namespace
}  // namespace datavo
