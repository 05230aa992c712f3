// Shard downloads (src/origin/shards.cpp): the ticket's checks in their documented order, ranges, and streaming
// across send chunks, over HTTP.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "unit/origin/server_fixture.hpp"

namespace datavo {
namespace {

using namespace origintest;

class OriginShardsTest : public ServerTest {};

TEST_F(OriginShardsTest, RangesResumeAndOutOfRangeIs416) {
  start();
  json t = ticket(1, 0, {"audio.wav", "transcript.txt"});
  const std::string path = t["url"];
  const std::string full = download(t);
  const std::size_t n = full.size();

  auto part = get(path, {"Range: bytes=10-19"});
  EXPECT_EQ(part.status, 206);
  EXPECT_EQ(part.header("content-range"), "bytes 10-19/" + std::to_string(n));
  EXPECT_EQ(part.header("content-length"), "10");
  EXPECT_EQ(part.body, full.substr(10, 10));

  // An interrupted download resumes from where it stopped.
  auto head = get(path, {"Range: bytes=0-1000"});
  auto tail = get(path, {"Range: bytes=1001-"});
  EXPECT_EQ(head.status, 206);
  EXPECT_EQ(tail.status, 206);
  EXPECT_EQ(head.body + tail.body, full);

  auto suffix = get(path, {"Range: bytes=-7"});
  EXPECT_EQ(suffix.status, 206);
  EXPECT_EQ(suffix.body, full.substr(n - 7));
  auto clipped = get(path, {"Range: bytes=5-99999999"});
  EXPECT_EQ(clipped.status, 206);
  EXPECT_EQ(clipped.body, full.substr(5));
  EXPECT_EQ(clipped.header("content-range"), "bytes 5-" + std::to_string(n - 1) + "/" + std::to_string(n));

  for (std::string range :
       {"bytes=" + std::to_string(n) + "-", "bytes=" + std::to_string(n + 10) + "-" + std::to_string(n + 20),
        std::string("bytes=-0")}) {
    auto outside = get(path, {"Range: " + range});
    EXPECT_EQ(outside.status, 416) << range;
    EXPECT_EQ(outside.header("content-range"), "bytes */" + std::to_string(n)) << range;
    EXPECT_EQ(error_code(outside), "range_not_satisfiable") << range;
  }
  auto stale = get(path, {"Range: bytes=10-19", "If-Range: \"0000\""});
  EXPECT_EQ(stale.status, 200);
  EXPECT_EQ(stale.body, full);
  auto current = get(path, {"Range: bytes=10-19", "If-Range: \"" + t["sha256"].get<std::string>() + "\""});
  EXPECT_EQ(current.status, 206);
  auto several = get(path, {"Range: bytes=0-1,5-6"});
  EXPECT_EQ(several.status, 200) << "several ranges: the whole tar";
  EXPECT_EQ(several.body, full);
}

TEST_F(OriginShardsTest, ForgedTicketsGet403) {
  start();
  json t = ticket(1, 0, {"audio.wav"});
  const std::string url = t["url"];
  const std::string path = url.substr(0, url.find('?'));
  const auto params = query_of(url);
  auto with = [&](const std::string& key, const std::string& value) {
    auto changed = params;
    changed[key] = value;
    return build_url(path, changed);
  };
  std::string sig = params.at("sig");
  sig[0] = sig[0] == 'a' ? 'b' : 'a';
  const std::string other_hash = json_of(post_ticket(R"({"dataset":"voice","split":"train","revision":1,
      "shard_index":1,"keys":["audio.wav"]})"))["content_hash"];
  for (const std::string& forged :
       {with("sig", sig), with("sig", std::string(64, '0')), with("sig", "abc"), with("rev", "2"), with("shard", "1"),
        with("keys", "audio.wav,transcript.txt"), with("exp", std::to_string(std::stoll(params.at("exp")) + 3600)),
        with("split", "test"), build_url("/v1/shards/" + other_hash + ".tar", params)}) {
    auto r = get(forged);
    EXPECT_EQ(r.status, 403) << forged << " -> " << r.body;
    EXPECT_EQ(error_code(r), "forbidden") << forged;
  }
  auto changed = params;
  changed.erase("sig");
  EXPECT_EQ(get(build_url(path, changed)).status, 400);
  EXPECT_EQ(get(path).status, 400);
}

TEST_F(OriginShardsTest, ExpiredTicketsGet410) {
  start();
  json t = ticket(1, 0, {"audio.wav"});
  const std::string url = t["url"];
  auto params = query_of(url);
  origin::TicketFields fields;
  fields.content_hash = t["content_hash"];
  fields.dataset = "voice";
  fields.split = "train";
  fields.revision = 1;
  fields.shard_index = 0;
  fields.keys = {"audio.wav"};
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  fields.expires_at = now.count() - 10;
  auto store = origin::Store::open(store_root(), origin::Store::Create::no);
  ASSERT_TRUE(store);
  params["exp"] = std::to_string(fields.expires_at);
  params["sig"] = origin::sign_ticket(store->secret(), fields);
  auto expired = get(build_url(url.substr(0, url.find('?')), params));
  EXPECT_EQ(expired.status, 410) << expired.body;
  EXPECT_EQ(error_code(expired), "expired");

  params["sig"] = origin::sign_ticket("not the secret, but long enough!!", fields);
  EXPECT_EQ(get(build_url(url.substr(0, url.find('?')), params)).status, 403) << "a forgery is 403, expired or not";
}

TEST_F(OriginShardsTest, ShortTicketTtlExpires) {
  OriginServerOptions options;
  options.ticket_ttl = Seconds{1};
  start(options);
  json t = ticket(1, 0, {"audio.wav"});
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  EXPECT_LE(t["expires_at"].get<std::int64_t>(), now.count() + 1);
  // A ticket is good through its expires_at second and refused after it.
  std::this_thread::sleep_until(
      std::chrono::system_clock::time_point(std::chrono::seconds(t["expires_at"].get<std::int64_t>() + 1)) +
      std::chrono::milliseconds(50));
  EXPECT_EQ(get(t["url"]).status, 410);
}

TEST_F(OriginShardsTest, TwoStoresPackedFromTheSameInputServeIdenticalTars) {
  pack_or_fail(dir_.sub("src"), dir_.sub("store2"), "voice/train", 2);
  start();
  auto first = OriginServer::start(quiet(dir_.sub("store2")));
  ASSERT_TRUE(first) << first.error().message;
  std::unique_ptr<OriginServer> other = std::move(first).value();
  for (std::uint64_t shard = 0; shard < 3; ++shard) {
    json a = ticket(1, shard, {"audio.wav", "transcript.txt"});
    auto tb = origintest::http("POST", other->base_url() + "/v1/stream-tickets", {},
                               json{{"dataset", "voice"},
                                    {"split", "train"},
                                    {"revision", 1},
                                    {"shard_index", shard},
                                    {"keys", {"audio.wav", "transcript.txt"}}}
                                   .dump());
    ASSERT_EQ(tb.status, 200);
    json b = json_of(tb);
    EXPECT_EQ(a["sha256"], b["sha256"]);
    EXPECT_EQ(a["size"], b["size"]);
    auto bytes_b = origintest::http("GET", other->base_url() + b["url"].get<std::string>());
    EXPECT_EQ(download(a), bytes_b.body);
  }
}

TEST(OriginShards, LargeShardsStreamAcrossChunks) {
  TempDir dir;
  std::string big(6 * 1024 * 1024 + 123, '\0');
  std::mt19937 random(7);
  for (auto& c : big) c = static_cast<char>(random());
  origintest::write_text(dir.sub("src/s1.bin"), big);
  origintest::write_text(dir.sub("src/s2.bin"), big.substr(17));
  pack_or_fail(dir.sub("src"), dir.sub("store"), "big/train", 10);
  auto server = OriginServer::start(quiet(dir.sub("store")));
  ASSERT_TRUE(server) << server.error().message;
  const std::string base = (*server)->base_url();
  auto t =
      json_of(origintest::http("POST", base + "/v1/stream-tickets", {},
                               R"({"dataset":"big","split":"train","revision":1,"shard_index":0,"keys":["bin"]})"));
  ASSERT_TRUE(t.contains("url")) << t.dump();
  auto full = origintest::http("GET", base + t["url"].get<std::string>());
  ASSERT_EQ(full.status, 200);
  EXPECT_EQ(full.body.size(), t["size"].get<std::size_t>());
  EXPECT_EQ(sha256_hex(full.body), t["sha256"]);
  auto members = members_of(full.body);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].second, big);
  const std::size_t mib = 1 << 20;
  auto across = origintest::http("GET", base + t["url"].get<std::string>(),
                                 {"Range: bytes=" + std::to_string(mib - 5) + "-" + std::to_string(3 * mib + 5)});
  EXPECT_EQ(across.status, 206);
  EXPECT_EQ(across.body, full.body.substr(mib - 5, 2 * mib + 11));
}

}  // namespace
}  // namespace datavo
