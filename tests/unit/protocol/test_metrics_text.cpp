// The origin's metrics in the Prometheus text format (src/protocol/metrics_text.cpp).
#include <gtest/gtest.h>

#include "datavo/protocol.hpp"

namespace datavo {
namespace {

TEST(ProtocolMetricsText, ParsesPrometheusText) {
  auto metrics = OriginMetrics::parse(
      "# HELP datavo_requests_total Requests.\n# TYPE datavo_requests_total counter\n"
      "datavo_requests_total{route=\"manifest\",status=\"200\"} 12\n"
      "datavo_requests_total{route=\"manifest\",status=\"304\"} 3.0\n"
      "datavo_requests_total{status=\"206\",route=\"shard\"} 1e0\n"
      "datavo_response_bytes_total{route=\"shard\"} 1048576\n"
      "datavo_requests_total_other{route=\"x\"} junk\n"
      "process_cpu_seconds_total 1.5\n");
  ASSERT_TRUE(metrics) << metrics.error().message;
  EXPECT_EQ(metrics->requests_for("manifest"), 15u);
  EXPECT_EQ(metrics->requests_for("manifest", "304"), 3u);
  EXPECT_EQ(metrics->requests_for("shard"), 1u);
  EXPECT_EQ(metrics->requests_for("ticket"), 0u);
  EXPECT_EQ(metrics->response_bytes.at("shard"), 1048576u);
}

TEST(ProtocolMetricsText, RoundTrips) {
  OriginMetrics metrics;
  metrics.requests[{"manifest", "200"}] = 2;
  metrics.requests[{"shard", "206"}] = 1;
  metrics.requests[{"other", "404"}] = 7;
  metrics.response_bytes = {{"manifest", 300}, {"shard", 0}, {"ticket", 99}};
  auto parsed = OriginMetrics::parse(metrics.to_text());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, metrics);
  EXPECT_NE(metrics.to_text().find("datavo_requests_total{route=\"shard\",status=\"206\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.to_text().find("# TYPE datavo_response_bytes_total counter\n"), std::string::npos);
}

TEST(ProtocolMetricsText, MalformedSamplesAreRefusedNamingTheLine) {
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"datavo_requests_total{route=\"x\",status=\"200\"} many\n", "line 1: bad value 'many'"},
           {"# x\ndatavo_response_bytes_total{route=\"x\"} -3\n", "line 2: bad value '-3'"},
           {"datavo_requests_total{route=\"x\" 5\n", "line 1: no closing brace"},
       }) {
    auto parsed = OriginMetrics::parse(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error().code, ErrorCode::remote);
    EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
  }
}

}  // namespace
}  // namespace datavo
