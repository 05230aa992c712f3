// OriginServer in-process on an ephemeral loopback port, driven over HTTP with libcurl.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "datavo/origin.hpp"
#include "datavo/tar.hpp"
#include "origin/store.hpp"
#include "origin/ticket.hpp"
#include "unit/origin/origin_test_support.hpp"

namespace datavo {
namespace {

using origintest::HttpResult;
using origintest::make_sample_dir;
using origintest::pack_or_fail;
using origintest::payload;
using origintest::sample_ids;
using origintest::sha256_hex;
using shardtest::TempDir;
using json = nlohmann::json;

OriginServerOptions quiet(const std::string& store, std::uint16_t port = 0) {
  OriginServerOptions options;
  options.store = store;
  options.port = port;
  options.log_requests = false;
  return options;
}

json json_of(const HttpResult& r) { return json::parse(r.body, nullptr, false); }

// The error code of a JSON error body, "" when the body is not one.
std::string error_code(const HttpResult& r) {
  json body = json_of(r);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  const json& error = body["error"];
  if (!error.contains("message") || !error["message"].is_string()) return "";
  return error.value("code", "");
}

std::map<std::string, std::string> query_of(const std::string& url) {
  std::map<std::string, std::string> params;
  std::string query = url.substr(url.find('?') + 1);
  for (std::size_t begin = 0; begin < query.size();) {
    std::size_t end = std::min(query.find('&', begin), query.size());
    std::string pair = query.substr(begin, end - begin);
    auto eq = pair.find('=');
    params[pair.substr(0, eq)] = pair.substr(eq + 1);
    begin = end + 1;
  }
  return params;
}

std::string build_url(const std::string& path, const std::map<std::string, std::string>& params) {
  std::string url = path + "?";
  for (const auto& [k, v] : params) url += (url.back() == '?' ? "" : "&") + k + "=" + v;
  return url;
}

// (member name, payload) in archive order.
std::vector<std::pair<std::string, std::string>> members_of(const std::string& tar) {
  std::vector<std::pair<std::string, std::string>> out;
  TarReader reader(std::as_bytes(std::span(tar)), "download");
  for (;;) {
    auto member = reader.next();
    EXPECT_TRUE(member) << member.error().message;
    if (!member || !*member) break;
    out.emplace_back(std::string((*member)->name),
                     std::string(reinterpret_cast<const char*>((*member)->data.data()), (*member)->data.size()));
  }
  return out;
}

class OriginServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_sample_dir(dir_.sub("src"), sample_ids(0, 5));
    pack_or_fail(dir_.sub("src"), store_root(), "voice/train", 2);
  }

  std::string store_root() const { return dir_.sub("store"); }

  void start(OriginServerOptions options = {}) {
    if (options.store.empty()) options.store = store_root();
    options.log_requests = false;
    auto started = OriginServer::start(std::move(options));
    ASSERT_TRUE(started) << started.error().message;
    server_ = std::move(started).value();
  }

  std::string url(const std::string& path) const { return server_->base_url() + path; }
  std::vector<std::string> auth() const {
    return token_.empty() ? std::vector<std::string>{} : std::vector<std::string>{"Authorization: Bearer " + token_};
  }
  HttpResult get(const std::string& path, std::vector<std::string> headers = {}) const {
    for (auto& h : auth()) headers.push_back(h);
    return origintest::http("GET", url(path), headers);
  }
  HttpResult post_ticket(const std::string& body) const {
    auto headers = auth();
    headers.push_back("Content-Type: application/json");
    return origintest::http("POST", url("/v1/stream-tickets"), headers, body);
  }
  json manifest(std::optional<std::uint64_t> revision = std::nullopt) const {
    auto r = get("/v1/datasets/voice/train/manifest" + (revision ? "?revision=" + std::to_string(*revision) : ""));
    EXPECT_EQ(r.status, 200) << r.body;
    return json_of(r);
  }
  json ticket(std::uint64_t revision, std::uint64_t shard, const std::vector<std::string>& keys) const {
    auto r = post_ticket(
        json{{"dataset", "voice"}, {"split", "train"}, {"revision", revision}, {"shard_index", shard}, {"keys", keys}}
            .dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json_of(r);
  }
  std::string download(const json& t) const {
    auto r = get(t["url"].get<std::string>());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  }

  TempDir dir_;
  std::string token_;
  std::unique_ptr<OriginServer> server_;
};

TEST_F(OriginServerTest, InstanceIsStableAcrossRestarts) {
  start();
  auto r = get("/v1/instance");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/json");
  json body = json_of(r);
  EXPECT_EQ(body["protocol_version"], 1);
  EXPECT_EQ(body["server"], "datavo-serve/0.1.0");
  const std::string id = body["instance_id"];
  EXPECT_FALSE(id.empty());
  server_.reset();
  start();
  EXPECT_EQ(json_of(get("/v1/instance"))["instance_id"], id);
  EXPECT_TRUE(server_->base_url().starts_with("http://127.0.0.1:"));
  EXPECT_GT(server_->port(), 0);
}

TEST_F(OriginServerTest, ManifestHasAnEtagAndAConditionalGetGets304) {
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

TEST_F(OriginServerTest, ManifestErrorsAreJson) {
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

TEST_F(OriginServerTest, RevisionsAdvanceWhileServingAndOldOnesStayReadable) {
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

TEST_F(OriginServerTest, ARevisionBeyondLatestIsNeverServed) {
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

TEST_F(OriginServerTest, TicketNamesTheContentHashAndTheServedBytes) {
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

TEST_F(OriginServerTest, AKeySubsetServesOnlyThoseMembers) {
  start();
  json t = ticket(1, 0, {"transcript.txt"});
  auto members = members_of(download(t));
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].first, "utt_0000.transcript.txt");
  EXPECT_EQ(members[1].first, "utt_0001.transcript.txt");
  EXPECT_NE(t["content_hash"], ticket(1, 0, {"audio.wav"})["content_hash"]);
}

TEST_F(OriginServerTest, TicketRequestValidation) {
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

TEST_F(OriginServerTest, RangesResumeAndOutOfRangeIs416) {
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

TEST_F(OriginServerTest, ForgedTicketsGet403) {
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

TEST_F(OriginServerTest, ExpiredTicketsGet410) {
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

TEST_F(OriginServerTest, ShortTicketTtlExpires) {
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

TEST_F(OriginServerTest, BearerTokenIsRequiredOnEveryApiCallButMetrics) {
  OriginServerOptions options;
  options.token = "s3cret-token";
  start(options);
  for (const std::vector<std::string>& headers : {std::vector<std::string>{},
                                                  {"Authorization: Bearer wrong"},
                                                  {"Authorization: Bearer s3cret-token2"},
                                                  {"Authorization: Basic s3cret-token"},
                                                  {"Authorization: s3cret-token"}}) {
    auto r = origintest::http("GET", url("/v1/datasets/voice/train/manifest"), headers);
    EXPECT_EQ(r.status, 401) << (headers.empty() ? "<none>" : headers[0]);
    EXPECT_EQ(error_code(r), "unauthorized");
    EXPECT_NE(r.header("www-authenticate").find("Bearer"), std::string::npos);
  }
  EXPECT_EQ(origintest::http("POST", url("/v1/stream-tickets"), {}, "{}").status, 401);
  EXPECT_EQ(origintest::http("GET", url("/v1/instance")).status, 401);
  EXPECT_EQ(origintest::http("GET", url("/v1/metrics")).status, 200);

  token_ = "s3cret-token";
  EXPECT_EQ(get("/v1/instance").status, 200);
  EXPECT_EQ(origintest::http("GET", url("/v1/instance"), {"Authorization: bearer s3cret-token"}).status, 200);
  json t = ticket(1, 0, {"audio.wav"});
  EXPECT_EQ(origintest::http("GET", url(t["url"])).status, 401) << "a ticket does not replace the token";
  EXPECT_EQ(get(t["url"]).status, 200);
}

TEST_F(OriginServerTest, NamesThatTryToLeaveTheStoreAreRefused) {
  start();
  auto secret = origin::Store::open(store_root(), origin::Store::Create::no)->secret();
  for (const char* path : {
           "/v1/datasets/../../secret/manifest",
           "/v1/datasets/%2e%2e/train/manifest",
           "/v1/datasets/voice/%2e%2e/manifest",
           "/v1/datasets/%2e%2e/%2e%2e/manifest",
           "/v1/datasets/voice/..%2f..%2f..%2fsecret/manifest",
           "/v1/datasets//etc/manifest",
           "/v1/datasets/%2fetc/passwd/manifest",
           "/v1/datasets/voice/tr%00ain/manifest",
           "/v1/datasets/voice%00/train/manifest",
           "/v1/datasets/voice/train/../../../secret/manifest",
           "/v1/shards/../../secret",
           "/v1/shards/..%2f..%2fsecret",
           "/v1/shards/%2e%2e%2f%2e%2e%2fsecret.tar",
       }) {
    auto r = get(path);
    EXPECT_EQ(r.status, 400) << path << " -> " << r.body;
    EXPECT_EQ(error_code(r), "bad_request") << path;
    EXPECT_EQ(r.body.find(secret), std::string::npos);
  }
  for (const char* body : {
           R"({"dataset":"..","split":"train","revision":1,"shard_index":0,"keys":["audio.wav"]})",
           R"({"dataset":"voice/../x","split":"train","revision":1,"shard_index":0,"keys":["audio.wav"]})",
           R"({"dataset":"/etc","split":"train","revision":1,"shard_index":0,"keys":["audio.wav"]})",
           R"({"dataset":"voice","split":"train\u0000","revision":1,"shard_index":0,"keys":["audio.wav"]})",
           R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":["../../secret"]})",
           R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":["/etc/passwd"]})",
           R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":["audio.wav\u0000x"]})",
           R"({"dataset":"voice","split":"train","revision":1,"shard_index":0,"keys":["a/../../b"]})",
       }) {
    auto r = post_ticket(body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(error_code(r), "bad_request") << body;
  }
}

TEST_F(OriginServerTest, TwoStoresPackedFromTheSameInputServeIdenticalTars) {
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

TEST_F(OriginServerTest, MetricsCountRequestsByRouteAndStatusAndShardBytesSent) {
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

TEST_F(OriginServerTest, ConcurrentFirstTicketsForOneKeyGroupAgree) {
  start();
  constexpr int k_clients = 8;
  std::vector<json> tickets(k_clients);
  std::vector<std::string> bodies(k_clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < k_clients; ++i) {
    threads.emplace_back([&, i] {
      auto r = post_ticket(R"({"dataset":"voice","split":"train","revision":1,"shard_index":1,
                              "keys":["audio.wav","transcript.txt"]})");
      tickets[i] = json_of(r);
      if (r.status == 200) bodies[i] = get(tickets[i]["url"]).body;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < k_clients; ++i) {
    ASSERT_TRUE(tickets[i].is_object() && tickets[i].contains("sha256")) << tickets[i].dump();
    EXPECT_EQ(tickets[i]["sha256"], tickets[0]["sha256"]);
    EXPECT_EQ(sha256_hex(bodies[i]), tickets[0]["sha256"]);
  }
  for (const auto& entry : std::filesystem::directory_iterator(store_root() + "/tars")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST_F(OriginServerTest, ATarNotBuiltWithinTicketWaitIsAnswered202AndBuiltInTheBackground) {
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

// More builds than builder threads, all queued at once: every one is built in the end.
TEST_F(OriginServerTest, ManyShardsPreparingAtOnceAreAllBuilt) {
  OriginServerOptions options;
  options.ticket_wait = Milliseconds{0};
  start(options);
  const std::size_t shards = manifest()["shards"].size();
  ASSERT_GE(shards, 3u);
  std::vector<std::string> bodies;
  for (std::size_t shard = 0; shard < shards; ++shard) {
    for (const char* key : {"audio.wav", "transcript.txt"}) {
      bodies.push_back(
          json{{"dataset", "voice"}, {"split", "train"}, {"revision", 1}, {"shard_index", shard}, {"keys", {key}}}
              .dump());
      EXPECT_EQ(post_ticket(bodies.back()).status, 202);
    }
  }
  for (const auto& body : bodies) {
    HttpResult r = post_ticket(body);
    for (int i = 0; i < 400 && r.status == 202; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      r = post_ticket(body);
    }
    ASSERT_EQ(r.status, 200) << body << ": " << r.body;
    json t = json_of(r);
    EXPECT_EQ(sha256_hex(download(t)), t["sha256"]);
  }
}

// Stopping with builds queued and under way neither hangs nor leaves a temporary tar behind.
TEST_F(OriginServerTest, StoppingWithBuildsQueuedReturnsAndLeavesNoTemporaries) {
  OriginServerOptions options;
  options.ticket_wait = Milliseconds{0};
  start(options);
  const std::size_t shards = manifest()["shards"].size();
  for (std::size_t shard = 0; shard < shards; ++shard) {
    EXPECT_EQ(post_ticket(json{{"dataset", "voice"},
                               {"split", "train"},
                               {"revision", 1},
                               {"shard_index", shard},
                               {"keys", {"audio.wav", "transcript.txt"}}}
                              .dump())
                  .status,
              202);
  }
  server_->stop();
  server_.reset();
  for (const auto& entry : std::filesystem::directory_iterator(store_root() + "/tars")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST_F(OriginServerTest, TicketWaitBeyondTheClientsStallWindowIsRefused) {
  OriginServerOptions options;
  options.store = store_root();
  options.ticket_wait = Milliseconds{20'001};
  auto started = OriginServer::start(options);
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(started.error().message.find("ticket_wait must be from 0 to 20000 ms"), std::string::npos)
      << started.error().message;
}

TEST_F(OriginServerTest, AMissingTarIsMaterialisedAgain) {
  start();
  json t = ticket(1, 0, {"audio.wav"});
  std::filesystem::remove_all(store_root() + "/tars");
  std::filesystem::create_directories(store_root() + "/tars");
  const std::string bytes = download(t);
  EXPECT_EQ(sha256_hex(bytes), t["sha256"]);
}

TEST(OriginServerStreaming, LargeShardsStreamAcrossChunks) {
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

TEST(OriginServerLifecycle, StopEndsWaitAndAUsedPortIsRefused) {
  TempDir dir;
  make_sample_dir(dir.sub("src"), {"s1"});
  pack_or_fail(dir.sub("src"), dir.sub("store"), "voice/train", 2);
  auto server = OriginServer::start(quiet(dir.sub("store")));
  ASSERT_TRUE(server) << server.error().message;
  auto taken = OriginServer::start(quiet(dir.sub("store"), (*server)->port()));
  EXPECT_FALSE(taken) << "the port is in use";

  std::thread waiter([&] { (*server)->wait(); });
  auto begin = std::chrono::steady_clock::now();
  (*server)->stop();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
  (*server)->stop();  // idempotent

  auto missing = OriginServer::start(quiet(dir.sub("no-store")));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

}  // namespace
}  // namespace datavo
