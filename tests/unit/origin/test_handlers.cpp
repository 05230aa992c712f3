// The JSON routes of the server (src/origin/handlers.cpp): manifests with their ETags and revisions, ticket
// requests and their validation, and the 202 "preparing" answer, over HTTP.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "datavo/protocol.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "unit/origin/server_fixture.hpp"

namespace datavo {
namespace {

using namespace origintest;

class OriginHandlersTest : public ServerTest {};

TEST_F(OriginHandlersTest, ManifestHasAnEtagAndAConditionalGetGets304) {
  start();
  auto r = get("/v1/datasets/voice/train/manifest");
  ASSERT_EQ(r.status, 200) << r.body;
  json m = json_of(r);
  EXPECT_EQ(m["dataset"], "voice");
  EXPECT_EQ(m["split"], "train");
  EXPECT_EQ(m["revision"], 1);
  EXPECT_EQ(m["keys"], json({"audio.wav", "transcript.txt"}));
  EXPECT_EQ(m["shards"], json::parse(R"([{"index":0,"samples":["utt_0000","utt_0001"]},
                                         {"index":1,"samples":["utt_0002","utt_0003"]},
                                         {"index":2,"samples":["utt_0004"]}])"));
  const std::string etag = "\"" + m["manifest_ref"].get<std::string>() + ".1\"";
  EXPECT_EQ(r.header("etag"), etag);
  EXPECT_EQ(r.header("cache-control"), "no-cache");

  auto again = get("/v1/datasets/voice/train/manifest", {"If-None-Match: " + etag});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(get("/v1/datasets/voice/train/manifest", {"If-None-Match: \"other\", " + etag}).status, 304);
  EXPECT_EQ(get("/v1/datasets/voice/train/manifest", {"If-None-Match: \"other\""}).status, 200);

  auto pinned = get("/v1/datasets/voice/train/manifest?revision=1");
  ASSERT_EQ(pinned.status, 200);
  EXPECT_EQ(pinned.header("etag"), etag);
  EXPECT_NE(pinned.header("cache-control").find("immutable"), std::string::npos);
  EXPECT_EQ(get("/v1/datasets/voice/train/manifest?revision=1", {"If-None-Match: " + etag}).status, 304);
}

TEST_F(OriginHandlersTest, ManifestErrorsAreJson) {
  start();
  auto unknown = get("/v1/datasets/nope/train/manifest");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(error_code(unknown), "not_found");
  EXPECT_NE(unknown.body.find("unknown dataset"), std::string::npos) << unknown.body;
  auto split = get("/v1/datasets/voice/nope/manifest");
  EXPECT_EQ(split.status, 404);
  EXPECT_NE(split.body.find("unknown split"), std::string::npos) << split.body;
  auto revision = get("/v1/datasets/voice/train/manifest?revision=7");
  EXPECT_EQ(revision.status, 404);
  EXPECT_EQ(error_code(revision), "not_found");
  for (const char* bad : {"0", "-1", "abc", "01", "1.0", ""}) {
    auto r = get(std::string("/v1/datasets/voice/train/manifest?revision=") + bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(error_code(r), "bad_request") << bad;
  }
  auto route = get("/v2/whatever");
  EXPECT_EQ(route.status, 404);
  EXPECT_EQ(error_code(route), "not_found");
}

TEST_F(OriginHandlersTest, RevisionsAdvanceWhileServingAndOldOnesStayReadable) {
  start();
  json first = manifest();
  const std::string old_etag = "\"" + first["manifest_ref"].get<std::string>() + ".1\"";
  make_sample_dir(dir_.sub("src"), sample_ids(5, 2));
  pack_or_fail(dir_.sub("src"), store_root(), "voice/train", 2);

  auto latest = get("/v1/datasets/voice/train/manifest", {"If-None-Match: " + old_etag});
  ASSERT_EQ(latest.status, 200);
  json second = json_of(latest);
  EXPECT_EQ(second["revision"], 2);
  EXPECT_EQ(second["shards"].size(), 4u);
  EXPECT_EQ(second["shards"][3]["samples"], json({"utt_0005", "utt_0006"}));
  EXPECT_EQ(second["shards"][2], first["shards"][2]);

  EXPECT_EQ(manifest(1), first);
  json old = ticket(1, 2, {"audio.wav"});
  auto members = members_of(download(old));
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].first, "utt_0004.audio.wav");
  EXPECT_NE(ticket(2, 2, {"audio.wav"})["content_hash"], old["content_hash"]) << "the revision is in the hash";
}

TEST_F(OriginHandlersTest, ARevisionBeyondLatestIsNeverServed) {
  start();
  // What a pack that crashed between writing revisions/2.json and LATEST leaves behind.
  const std::string dir = store_root() + "/datasets/voice/train/revisions/";
  std::string text = origintest::read_text(dir + "1.json");
  auto at = text.find("\"revision\":1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "\"revision\":2");
  origintest::write_text(dir + "2.json", text);
  EXPECT_EQ(get("/v1/datasets/voice/train/manifest?revision=2").status, 404);
  EXPECT_EQ(
      post_ticket(R"({"dataset":"voice","split":"train","revision":2,"shard_index":0,"keys":["audio.wav"]})").status,
      404);
  EXPECT_EQ(manifest()["revision"], 1);
}

TEST_F(OriginHandlersTest, TicketNamesTheContentHashAndTheServedBytes) {
  start();
  json m = manifest();
  for (std::uint64_t shard = 0; shard < m["shards"].size(); ++shard) {
    json t = ticket(1, shard, {"transcript.txt", "audio.wav", "audio.wav"});
    ShardIdentity identity{m["manifest_ref"].get<std::string>(),
                           "1",
                           shard,
                           {"audio.wav", "transcript.txt"},
                           m["shards"][shard]["samples"].get<std::vector<std::string>>()};
    EXPECT_EQ(t["content_hash"], compute_content_hash(identity).hex());
    const std::string url = t["url"];
    EXPECT_TRUE(url.starts_with("/v1/shards/" + t["content_hash"].get<std::string>() + ".tar?")) << url;
    auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
    EXPECT_NEAR(t["expires_at"].get<double>(), static_cast<double>(now.count() + 900), 5.0);

    auto r = get(url);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("content-type"), "application/x-tar");
    EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size()));
    EXPECT_EQ(r.header("accept-ranges"), "bytes");
    EXPECT_EQ(r.header("etag"), "\"" + t["sha256"].get<std::string>() + "\"");
    EXPECT_EQ(r.body.size(), t["size"].get<std::size_t>());
    EXPECT_EQ(sha256_hex(r.body), t["sha256"]);

    std::vector<std::pair<std::string, std::string>> expected;
    for (const auto& id : m["shards"][shard]["samples"]) {
      const std::string sample = id.get<std::string>();
      for (const char* key : {"audio.wav", "transcript.txt"})
        expected.emplace_back(sample + "." + key, payload(sample, key));
    }
    EXPECT_EQ(members_of(r.body), expected);
  }
}

// The ticket carries the digest of every chunk of the bytes the shard URL serves, bound by chunks_sha256, in the
// server's chunk size; the parser of the client accepts it.
TEST_F(OriginHandlersTest, TicketCarriesTheChunkDigestsOfTheServedBytes) {
  OriginServerOptions options;
  options.chunk_size = KiB(4);
  start(options);
  json t = ticket(1, 0, {"audio.wav", "transcript.txt"});
  const std::string body = download(t);
  ASSERT_GT(body.size(), 4096u) << "the test needs two chunks at least";
  ChunkHasher hasher(KiB(4));
  hasher.update(body.data(), body.size());
  const ChunkDigests want = hasher.finish();
  EXPECT_EQ(t["chunk_size"], 4096);
  ASSERT_EQ(t["chunks"].size(), want.digests.size());
  for (std::size_t i = 0; i < want.digests.size(); ++i) EXPECT_EQ(t["chunks"][i], want.digests[i].hex()) << i;
  EXPECT_EQ(t["chunks_sha256"], sha256_hex(want.canonical()));
  auto parsed = StreamTicket::parse(t.dump());
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_TRUE(parsed->chunks);
  EXPECT_EQ(*parsed->chunks, want);
}

TEST(OriginServerOptionsTest, AChunkSizeOutsideTheRangeIsRefused) {
  for (Bytes size : {Bytes{4095}, GiB(1) + Bytes{1}}) {
    OriginServerOptions options;
    options.store = "/nonexistent-datavo-store";
    options.chunk_size = size;
    auto started = OriginServer::start(options);
    ASSERT_FALSE(started);
    EXPECT_EQ(started.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(started.error().message.find("chunk_size"), std::string::npos) << started.error().message;
  }
}

TEST_F(OriginHandlersTest, AKeySubsetServesOnlyThoseMembers) {
  start();
  json t = ticket(1, 0, {"transcript.txt"});
  auto members = members_of(download(t));
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].first, "utt_0000.transcript.txt");
  EXPECT_EQ(members[1].first, "utt_0001.transcript.txt");
  EXPECT_NE(t["content_hash"], ticket(1, 0, {"audio.wav"})["content_hash"]);
}

TEST_F(OriginHandlersTest, TicketRequestValidation) {
  start();
  struct Case {
    std::string body;
    int status;
  };
  const std::vector<Case> cases = {
      {"{not json", 400},
      {"[1, 2]", 400},
      {"", 400},
      {R"({"split":"train","revision":1,"shard_index":0,"keys":["audio.wav"]})", 400},
      {R"({"dataset":"voice","split":"train","revision":"1","shard_index":0,"keys":["audio.wav"]})", 400},
      {R"({"dataset":"voice","split":"train","revision":0,"shard_index":0,"keys":["audio.wav"]})", 400},
      {R"({"dataset":"voice","split":"train","revision":1.5,"shard_index":0,"keys":["audio.wav"]})", 400},
      {R"({"dataset":"voice","split":"train","revision":1,"shard_index":-1,"keys":["audio.wav"]})", 400},
      {R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":[]})", 400},
      {R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":[7]})", 400},
      {R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":"audio.wav"})", 400},
      {R"({"dataset":"nope","split":"train","revision":1,"shard_index":0,"keys":["audio.wav"]})", 404},
      {R"({"dataset":"voice","split":"train","revision":9,"shard_index":0,"keys":["audio.wav"]})", 404},
      {R"({"dataset":"voice","split":"train","revision":1,"shard_index":3,"keys":["audio.wav"]})", 404},
      {R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":["audio.wav","nope.bin"]})", 404},
  };
  for (const auto& c : cases) {
    auto r = post_ticket(c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    EXPECT_EQ(error_code(r), c.status == 400 ? "bad_request" : "not_found") << c.body;
  }
}

TEST_F(OriginHandlersTest, ATarNotBuiltWithinTicketWaitIsAnswered202AndBuiltInTheBackground) {
  OriginServerOptions options;
  options.ticket_wait = Milliseconds{0};
  start(options);
  const std::string body =
      json{{"dataset", "voice"}, {"split", "train"}, {"revision", 1}, {"shard_index", 0}, {"keys", {"audio.wav"}}}
          .dump();
  auto first = post_ticket(body);
  ASSERT_EQ(first.status, 202) << first.body;
  EXPECT_EQ(first.header("retry-after"), "1");
  json preparing = json_of(first);
  EXPECT_EQ(preparing["status"], "preparing");
  HttpResult ready = first;
  for (int i = 0; i < 400 && ready.status == 202; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    ready = post_ticket(body);
  }
  ASSERT_EQ(ready.status, 200) << ready.body;
  json t = json_of(ready);
  EXPECT_EQ(t["content_hash"], preparing["content_hash"]);
  EXPECT_EQ(sha256_hex(download(t)), t["sha256"]);
  // Built once, a ticket is answered at once even with ticket_wait 0.
  EXPECT_EQ(post_ticket(body).status, 200);
  auto metrics = get("/v1/metrics");
  EXPECT_NE(metrics.body.find("datavo_requests_total{route=\"ticket\",status=\"202\"}"), std::string::npos)
      << metrics.body;
}

}  // namespace
}  // namespace datavo
