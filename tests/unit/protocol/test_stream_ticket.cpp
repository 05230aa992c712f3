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
  return StreamTicket{ContentHash::parse(k_hash).value(),
                      Bytes{1048576},
                      Sha256::parse(k_sha).value(),
                      "/v1/shards/" + k_hash + ".tar?dataset=d&sig=x",
                      1764412800,
                      std::nullopt};
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

// A ticket with chunk digests: 3 chunks of 4 KiB (the last one short) for a 10000-byte tar.
StreamTicket chunked_ticket() {
  StreamTicket ticket = example_ticket();
  ticket.size = Bytes{10000};
  ChunkDigests chunks{KiB(4), {}};
  for (char c : {'1', '2', '3'}) chunks.digests.push_back(Sha256::parse(std::string(64, c)).value());
  ticket.chunks = chunks;
  return ticket;
}

TEST(ProtocolStreamTicket, ChunkDigestsRoundTripWithTheirBinding) {
  const StreamTicket ticket = chunked_ticket();
  const json body = json::parse(ticket.to_json());
  EXPECT_EQ(body["chunk_size"], 4096);
  EXPECT_EQ(body["chunks"].size(), 3u);
  EXPECT_EQ(body["chunks"][1], std::string(64, '2'));
  EXPECT_EQ(body["chunks_sha256"], ticket.chunks->binding().hex());
  auto parsed = StreamTicket::parse(ticket.to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, ticket);
}

// A server from before chunk digests (protocol v1 as first released) sends none of the three fields: the ticket
// parses, without chunks, and the client verifies the whole shard only.
TEST(ProtocolStreamTicket, ATicketWithoutChunkFieldsHasNoChunks) {
  const std::string old_server_ticket = R"({"content_hash":")" + k_hash + R"(","expires_at":1764412800,"sha256":")" +
                                        k_sha + R"(","size":1048576,"url":"/v1/shards/x.tar?sig=y"})";
  auto parsed = StreamTicket::parse(old_server_ticket);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_FALSE(parsed->chunks);
  EXPECT_EQ(parsed->to_json().find("chunk"), std::string::npos);
}

// Fields a later version adds are ignored, as the chunk fields are by a parser from before them.
TEST(ProtocolStreamTicket, UnknownFieldsAreIgnored) {
  json body = json::parse(chunked_ticket().to_json());
  body["chunks_url"] = "/v1/shards/x.chunks";
  body["hedging"] = {{"after_ms", 250}};
  auto parsed = StreamTicket::parse(body.dump());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, chunked_ticket());
}

TEST(ProtocolStreamTicket, ALyingOrMismatchedChunkListIsRefusedNamingTheField) {
  const json good = json::parse(chunked_ticket().to_json());
  const auto refused = [](const json& bad) {
    auto parsed = StreamTicket::parse(bad.dump());
    EXPECT_FALSE(parsed) << bad.dump();
    if (parsed) return std::string();
    EXPECT_EQ(parsed.error().code, ErrorCode::remote);
    return parsed.error().message;
  };
  json lying = good;  // a digest changed, the binding not: not the ticket's list
  lying["chunks"][2] = std::string(64, '4');
  EXPECT_NE(refused(lying).find("\"chunks_sha256\" is not the SHA-256 of the canonical list"), std::string::npos)
      << refused(lying);
  json short_list = good;  // one chunk short of the size, binding recomputed: still refused
  short_list["chunks"].erase(2);
  ChunkDigests two{KiB(4), {Sha256::parse(std::string(64, '1')).value(), Sha256::parse(std::string(64, '2')).value()}};
  short_list["chunks_sha256"] = two.binding().hex();
  EXPECT_NE(refused(short_list)
                .find("\"chunks\" does not fit the ticket: size: 2 chunk digests, but 10000 bytes in "
                      "chunks of 4096 make 3"),
            std::string::npos)
      << refused(short_list);
  json other_size = good;  // the list of another size
  other_size["size"] = 20000;
  EXPECT_NE(refused(other_size).find("\"chunks\" does not fit the ticket"), std::string::npos);
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"chunk_size", 0, "\"chunk_size\""},
      {"chunk_size", 512, "chunk_size 512 is outside"},
      {"chunk_size", "4096", "\"chunk_size\""},
      {"chunks", "abc", "\"chunks\""},
      {"chunks", json::array({std::string(64, '1'), 7, std::string(64, '3')}), "\"chunks[1]\" is not a string"},
      {"chunks", json::array({std::string(64, '1'), "xyz", std::string(64, '3')}), "\"chunks[1]\" is invalid"},
      {"chunks_sha256", "nope", "\"chunks_sha256\" is invalid"},
  };
  for (const auto& [field, value, needle] : cases) {
    json bad = good;
    bad[field] = value;
    EXPECT_NE(refused(bad).find(needle), std::string::npos) << refused(bad);
  }
  for (const char* field : {"chunk_size", "chunks", "chunks_sha256"}) {  // all three, or none
    json partial = good;
    partial.erase(field);
    EXPECT_NE(refused(partial).find("\"" + std::string(field) + "\""), std::string::npos) << refused(partial);
  }
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
