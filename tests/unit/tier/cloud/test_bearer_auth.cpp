// Tests of src/tier/cloud/bearer_auth.cpp: the token on every attempt, the decoration, a token with a line break
// refused, and which refusals invalidate the token (401 by default, the policy's otherwise).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tier/cloud/bearer_auth.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class FixedProvider final : public TokenProvider {
 public:
  Result<AccessToken> get() override {
    if (error) return *error;
    return AccessToken{token, WallClock::now() + 1h};
  }
  void invalidate() override { ++invalidations; }
  std::string describe() const override { return "the fixed provider"; }

  std::string token = "tok-1";
  std::optional<Error> error;
  int invalidations = 0;
};

net::PreparedRequest request() {
  net::PreparedRequest out;
  out.url = "https://example.test/o";
  return out;
}

TEST(BearerAuth, PutsTheTokenOnEveryAttempt) {
  auto provider = std::make_shared<FixedProvider>();
  auto auth = make_bearer_auth(provider);
  auto first = request();
  ASSERT_TRUE(auth->prepare(first, 1));
  EXPECT_EQ(net::find_header(first.headers, "Authorization"), "Bearer tok-1");
  provider->token = "tok-2";
  auto second = request();
  ASSERT_TRUE(auth->prepare(second, 2));
  EXPECT_EQ(net::find_header(second.headers, "Authorization"), "Bearer tok-2");
}

TEST(BearerAuth, DecoratesEveryAttempt) {
  auto provider = std::make_shared<FixedProvider>();
  BearerOptions options;
  options.decorate = [](net::PreparedRequest& r) { r.headers.push_back({"x-ms-version", "2021-12-02"}); };
  auto auth = make_bearer_auth(provider, options);
  auto prepared = request();
  ASSERT_TRUE(auth->prepare(prepared, 1));
  EXPECT_EQ(net::find_header(prepared.headers, "x-ms-version"), "2021-12-02");
}

TEST(BearerAuth, AProviderErrorOrALineBreakEndsTheRequest) {
  auto provider = std::make_shared<FixedProvider>();
  auto auth = make_bearer_auth(provider);
  provider->error = Error{ErrorCode::permission_denied, "no token"};
  auto prepared = request();
  auto result = auth->prepare(prepared, 1);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::permission_denied);
  provider->error.reset();
  provider->token = "tok\r\nX-Injected: 1";
  result = auth->prepare(prepared, 1);
  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, HasSubstr("the fixed provider: the access token contains a line break"));
  EXPECT_EQ(result.error().code, ErrorCode::remote);  // the issuer's text, not the caller's
  EXPECT_FALSE(net::find_header(prepared.headers, "Authorization"));
}

TEST(BearerAuth, OnlyAStaleRefusalInvalidatesTheToken) {
  auto provider = std::make_shared<FixedProvider>();
  auto auth = make_bearer_auth(provider);
  EXPECT_FALSE(auth->refresh_after_refusal(403, {}, ""));
  EXPECT_FALSE(auth->refresh_after_refusal(404, {}, ""));
  EXPECT_EQ(provider->invalidations, 0);
  EXPECT_TRUE(auth->refresh_after_refusal(401, {}, ""));
  EXPECT_EQ(provider->invalidations, 1);

  BearerOptions options;
  options.stale = [](long status, const net::HttpHeaders&, std::string_view body) {
    return status == 403 && body == "expired";
  };
  auto custom = make_bearer_auth(provider, options);
  EXPECT_FALSE(custom->refresh_after_refusal(401, {}, ""));
  EXPECT_FALSE(custom->refresh_after_refusal(403, {}, "forbidden"));
  EXPECT_TRUE(custom->refresh_after_refusal(403, {}, "expired"));
  EXPECT_EQ(provider->invalidations, 2);
}

}  // namespace
}  // namespace datavo::cloud
