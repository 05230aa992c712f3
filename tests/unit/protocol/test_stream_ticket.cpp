// Stream tickets (src/protocol/stream_ticket.cpp): the request, the ticket and the 202 answer, both directions.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "datavo/protocol.hpp"

namespace datavo {
namespace {

using json = nlohmann::json;

const std::string k_hash(64, 'a');
const std::string k_sha(64, 'b');

StreamTicket example_ticket() {
  return StreamTicket{ContentHash::parse(k_hash).value(), Bytes{1048576}, Sha256::parse(k_sha).value(),
                      "/v1/shards/" + k_hash + ".tar?dataset=d&sig=x", 1764412800};
}

TEST(ProtocolTicketRequest, RoundTrips) {
  const TicketRequest request{DatasetName{"voice_demo_v1", "train"}, 42, 3, {"audio.wav", "text.txt"}};
  auto parsed = TicketRequest::parse(request.to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, request);
}

TEST(ProtocolTicketRequest, KeysAreSortedAndDeduplicatedAndOtherFieldsIgnored) {
  auto parsed = TicketRequest::parse(
      R"({"dataset":"d","split":"s","revision":1,"shard_index":0,"keys":["b","a","b"],"extra":[1]})");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->keys, (std::vector<std::string>{"a", "b"}));
}

TEST(ProtocolTicketRequest, MalformedRequestsAreRefusedNamingTheField) {
  const std::string ds = R"("dataset":"voice","split":"train",)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not JSON"},
      {"[1, 2]", "not a JSON object"},
      {"", "not JSON"},
      {R"({"split":"train","revision":1,"shard_index":0,"keys":["audio.wav"]})", "\"dataset\""},
      {R"({"dataset":"../x","split":"train","revision":1,"shard_index":0,"keys":["a"]})", "\"dataset\" is invalid"},
      {"{" + ds + R"("revision":"1","shard_index":0,"keys":["audio.wav"]})", "\"revision\""},
      {"{" + ds + R"("revision":0,"shard_index":0,"keys":["audio.wav"]})", "\"revision\""},
      {"{" + ds + R"("revision":1.5,"shard_index":0,"keys":["audio.wav"]})", "\"revision\""},
      {"{" + ds + R"("revision":1,"shard_index":-1,"keys":["audio.wav"]})", "\"shard_index\""},
      {"{" + ds + R"("revision":1,"shard_index":0,"keys":[]})", "\"keys\" is empty"},
      {"{" + ds + R"("revision":1,"shard_index":0,"keys":[7]})", "\"keys[0]\" is not a string"},
      {"{" + ds + R"("revision":1,"shard_index":0,"keys":["a",".."]})", "\"keys[1]\" is invalid"},
      {"{" + ds + R"("revision":1,"shard_index":0,"keys":"audio.wav"})", "\"keys\""},
  };
  for (const auto& [text, needle] : cases) {
    auto parsed = TicketRequest::parse(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument) << text;
    EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
  }
}

TEST(ProtocolStreamTicket, RoundTrips) {
  auto parsed = StreamTicket::parse(example_ticket().to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, example_ticket());
}

TEST(ProtocolStreamTicket, MalformedTicketsAreRefusedNamingTheField) {
  const json good = json::parse(example_ticket().to_json());
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"content_hash", "ABC", "\"content_hash\" is invalid"},
      {"content_hash", 7, "\"content_hash\" is missing or not a string"},
      {"sha256", "xyz", "\"sha256\" is invalid"},
      {"size", -1, "\"size\""},
      {"size", "1", "\"size\""},
      {"url", "", "\"url\" is empty"},
      {"url", nullptr, "\"url\""},
      {"expires_at", 1.5, "\"expires_at\""},
      {"expires_at", "soon", "\"expires_at\""},
  };
  for (const auto& [field, value, needle] : cases) {
    json bad = good;
    bad[field] = value;
    auto parsed = StreamTicket::parse(bad.dump());
    ASSERT_FALSE(parsed) << bad.dump();
    EXPECT_EQ(parsed.error().code, ErrorCode::remote);
    EXPECT_NE(parsed.error().message.find("malformed ticket: "), std::string::npos) << parsed.error().message;
    EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
  }
  json missing = good;
  missing.erase("expires_at");
  EXPECT_FALSE(StreamTicket::parse(missing.dump()));
  EXPECT_FALSE(StreamTicket::parse("[]"));
}

TEST(ProtocolStreamTicket, ANegativeExpiryIsAnInteger) {
  StreamTicket ticket = example_ticket();
  ticket.expires_at = -5;
  auto parsed = StreamTicket::parse(ticket.to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->expires_at, -5);
}

TEST(ProtocolTicketPreparing, RoundTripsAndRefusesAnotherStatus) {
  const TicketPreparing preparing{ContentHash::parse(k_hash).value()};
  EXPECT_EQ(preparing.to_json(), R"({"content_hash":")" + k_hash + R"(","status":"preparing"})");
  auto parsed = TicketPreparing::parse(preparing.to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, preparing);
  auto other = TicketPreparing::parse(R"({"status":"done","content_hash":")" + k_hash + "\"}");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("\"status\""), std::string::npos) << other.error().message;
  EXPECT_FALSE(TicketPreparing::parse(R"({"status":"preparing","content_hash":"x"})"));
}

}  // namespace
}  // namespace datavo
