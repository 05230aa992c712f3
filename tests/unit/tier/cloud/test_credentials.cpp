// Tests of src/tier/cloud/credentials.cpp: the refresh margin, the token cache (refresh ahead of expiry, the cached
// token kept when a refresh ahead of expiry fails, one fetch for concurrent callers, invalidate), form encoding
// and the parsing of token responses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tier/cloud/credentials.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const WallClock::time_point k_t0 = WallClock::time_point(std::chrono::seconds(1'700'000'000));

TEST(CloudCredentials, RefreshMarginIsFiveMinutesOrHalfTheLifetime) {
  EXPECT_EQ(refresh_margin(1h), WallClock::duration(5min));
  EXPECT_EQ(refresh_margin(10min), WallClock::duration(5min));
  EXPECT_EQ(refresh_margin(4s), WallClock::duration(2s));
  EXPECT_EQ(refresh_margin(0s), WallClock::duration(0s));
}

TEST(CloudCredentials, TokenCacheRefreshesAheadOfExpiryAndAfterInvalidate) {
  TokenCache cache;
  int fetches = 0;
  WallClock::time_point now = k_t0;
  auto fetch = [&]() -> Result<AccessToken> { return AccessToken{"t" + std::to_string(++fetches), now + 10s}; };
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t1");
  now += 4s;  // 6 s of 10 left, margin 5 s
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t1");
  now += 2s;  // 4 s left
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t2");
  cache.invalidate();
  EXPECT_EQ(cache.get(now, fetch, "test")->token, "t3");
  EXPECT_EQ(fetches, 3);
}

TEST(CloudCredentials, AFailedRefreshKeepsTheValidTokenButNotAnExpiredOne) {
  TokenCache cache;
  WallClock::time_point now = k_t0;
  bool fail = false;
  auto fetch = [&]() -> Result<AccessToken> {
    if (fail) return Error{ErrorCode::remote, "token endpoint down"};
    return AccessToken{"good", now + 10s};
  };
  ASSERT_TRUE(cache.get(now, fetch, "test"));
  fail = true;
  now += 7s;  // inside the margin, not expired
  auto kept = cache.get(now, fetch, "test");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->token, "good");
  now += 4s;  // expired
  auto failed = cache.get(now, fetch, "test");
  ASSERT_FALSE(failed);
  EXPECT_THAT(failed.error().message, HasSubstr("token endpoint down"));
}

TEST(CloudCredentials, ConcurrentCallersShareOneFetch) {
  TokenCache cache;
  std::atomic<int> fetches{0};
  auto fetch = [&]() -> Result<AccessToken> {
    ++fetches;
    std::this_thread::sleep_for(50ms);
    return AccessToken{"shared", k_t0 + 1h};
  };
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      if (auto token = cache.get(k_t0, fetch, "test"); token && token->token == "shared") ++right;
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(fetches, 1);
  EXPECT_EQ(right, 8);
}

TEST(CloudCredentials, FormEncodingAndDecoding) {
  EXPECT_EQ(form_encode({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"}, {"a b", "x+y/z=~"}}),
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&a%20b=x%2By%2Fz%3D~");
  EXPECT_EQ(percent_decode("a%20b+c%2B").value(), "a b c+");
  EXPECT_FALSE(percent_decode("bad%2"));
  EXPECT_FALSE(percent_decode("bad%zz"));
}

TEST(CloudCredentials, TokenResponsesWithExpiresInOrExpiresOn) {
  auto in = parse_token_response(R"({"access_token":"a","expires_in":3599,"token_type":"Bearer"})", k_t0, "t");
  ASSERT_TRUE(in);
  EXPECT_EQ(in->token, "a");
  EXPECT_EQ(in->expires_at, k_t0 + 3599s);
  // IMDS gives numbers as strings.
  auto as_string = parse_token_response(R"({"access_token":"b","expires_in":"86399"})", k_t0, "t");
  ASSERT_TRUE(as_string);
  EXPECT_EQ(as_string->expires_at, k_t0 + 86399s);
  auto on = parse_token_response(R"({"access_token":"c","expires_on":"1700003600"})", k_t0, "t");
  ASSERT_TRUE(on);
  EXPECT_EQ(on->expires_at, k_t0 + 1h);
  auto cli = parse_token_response(R"({"accessToken":"d","expires_in":60})", k_t0, "t", "accessToken");
  ASSERT_TRUE(cli);
  EXPECT_EQ(cli->token, "d");

  auto no_token = parse_token_response(R"({"expires_in":60})", k_t0, "the endpoint");
  ASSERT_FALSE(no_token);
  EXPECT_THAT(no_token.error().message, HasSubstr("the endpoint: the token response has no \"access_token\""));
  EXPECT_FALSE(parse_token_response(R"({"access_token":"e"})", k_t0, "t"));
  EXPECT_FALSE(parse_token_response(R"({"access_token":"e","expires_in":"soon"})", k_t0, "t"));
  EXPECT_FALSE(parse_token_response("<html>", k_t0, "t"));
}

TEST(CloudCredentials, Rfc3339UtcTimes) {
  EXPECT_EQ(parse_rfc3339_utc("2023-11-14T22:13:20Z"), k_t0);
  EXPECT_EQ(parse_rfc3339_utc("2023-11-14T22:13:20.123456Z"), k_t0);
  EXPECT_FALSE(parse_rfc3339_utc("2023-11-14T22:13:20+01:00"));
  EXPECT_FALSE(parse_rfc3339_utc("yesterday"));
}

TEST(CloudCredentials, EnvironmentTreatsEmptyAsUnset) {
  CredentialEnv env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "EMPTY") return std::string();
    if (name == "SET") return std::string("value");
    return std::nullopt;
  };
  EXPECT_EQ(env.get("SET"), "value");
  EXPECT_EQ(env.get("EMPTY"), std::nullopt);
  EXPECT_EQ(env.get("UNSET"), std::nullopt);
}

}  // namespace
}  // namespace datavo::cloud
