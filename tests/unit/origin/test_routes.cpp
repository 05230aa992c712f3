// The server's routing and authentication (src/origin/routes.cpp): the bearer token on every route but metrics,
// refused names and unknown routes, over HTTP.
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

class OriginRoutesTest : public ServerTest {};

TEST_F(OriginRoutesTest, BearerTokenIsRequiredOnEveryApiCallButMetrics) {
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

TEST_F(OriginRoutesTest, NamesThatTryToLeaveTheStoreAreRefused) {
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

}  // namespace
}  // namespace datavo
