// Tests of src/tier/s3/aws_credentials.cpp: the chain's order over every link (environment, shared files, ECS,
// IMDS, against fakes on 127.0.0.1), what it says when nothing is found, caching, refresh ahead of expiry and
// after invalidate(), one fetch for concurrent callers, and that no secret reaches an Error message or a log line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "unit/tier/s3/aws_chain_fixture.hpp"
#include "util/log.hpp"

namespace datavo::s3 {
namespace {

using namespace std::chrono_literals;
using namespace chain_test;
using s3test::FakeEcs;
using s3test::LoopbackServer;
using s3test::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(CredentialsTest, EnvironmentBeatsProfileBeatsEcsBeatsImds) {
  FakeImds imds(clock_);
  FakeEcs ecs(clock_, 6h);
  enable_imds(imds.server());
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  write_text(home_file(".aws/credentials"), "[default]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = p\n");
  fake_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  fake_.vars["AWS_SECRET_ACCESS_KEY"] = "e";

  auto source = [&] {
    auto found = chain()->get();
    EXPECT_TRUE(found) << found.error().message;
    return found ? found->access_key_id : std::string();
  };
  EXPECT_EQ(source(), "AKIDENV");
  fake_.vars.erase("AWS_ACCESS_KEY_ID");
  fake_.vars.erase("AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(source(), "AKIDPROFILE");
  EXPECT_EQ(ecs.requests.load() + imds.token_requests.load(), 0);  // not asked while a link above answers
  std::filesystem::remove(home_file(".aws/credentials"));
  EXPECT_EQ(source(), "ECSKEY1");
  EXPECT_EQ(imds.token_requests.load(), 0);
  fake_.vars.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  EXPECT_EQ(source(), "ASIAIMDSKEY");
}

TEST_F(CredentialsTest, NothingFoundIsPermissionDeniedListingEverySource) {
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  const std::string& message = found.error().message;
  for (const char* source : {"environment:", "web identity:", "shared files: no profile default in",
                             "ECS container:", "EC2 instance metadata: disabled"})
    EXPECT_THAT(message, HasSubstr(source));
  EXPECT_THAT(message, HasSubstr(home_file(".aws/credentials")));
}

TEST_F(CredentialsTest, ShortLivedCredentialsAreRefreshedAheadOfExpiry) {
  FakeEcs ecs(clock_, 4s);  // refreshed when less than min(5 min, 4 s / 2) = 2 s is left
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  auto first = provider->get();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->access_key_id, "ECSKEY1");
  clock_->advance(1500ms);
  EXPECT_EQ(provider->get()->access_key_id, "ECSKEY1");  // cached: 2.5 s left
  EXPECT_EQ(ecs.fetches.load(), 1);
  clock_->advance(1s);  // 1.5 s left: due
  auto second = provider->get();
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->access_key_id, "ECSKEY2");
  EXPECT_EQ(*second->expiration, k_now + 6s);  // 2.5 s + 4 s, in the fake's whole seconds
  EXPECT_EQ(ecs.fetches.load(), 2);
}

TEST_F(CredentialsTest, InvalidateForcesARefetch) {
  FakeEcs ecs(clock_, 6h);
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  ASSERT_TRUE(provider->get());
  ASSERT_TRUE(provider->get());
  EXPECT_EQ(ecs.fetches.load(), 1);
  provider->invalidate();
  auto again = provider->get();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->access_key_id, "ECSKEY2");
  EXPECT_EQ(ecs.fetches.load(), 2);
}

TEST_F(CredentialsTest, AFailedEarlyRefreshKeepsTheCurrentCredentialsUntilTheyExpire) {
  FakeEcs ecs(clock_, 60s);
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  ASSERT_TRUE(provider->get());
  ecs.failing = true;
  clock_->advance(50s);  // 10 s left, under the 30 s margin: a refresh is tried, and fails
  auto kept = provider->get();
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->access_key_id, "ECSKEY1");
  clock_->advance(11s);  // expired
  auto gone = provider->get();
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::remote);
  // After an invalidate() the refused credentials are not handed out again either.
  ecs.failing = false;
  ASSERT_TRUE(provider->get());
  ecs.failing = true;
  provider->invalidate();
  EXPECT_FALSE(provider->get());
}

TEST_F(CredentialsTest, ConcurrentGetsShareOneFetch) {
  FakeEcs ecs(clock_, 6h);
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  auto provider = chain();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { ok += provider->get().has_value() ? 1 : 0; });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(ecs.fetches.load(), 1);
}

// --- Secrets ----------------------------------------------------------------------------------------------

TEST_F(CredentialsTest, NoSecretReachesALogLineOrAnErrorMessage) {
  const auto previous = log::level();
  log::set_level(log::Level::debug);
  std::vector<std::string> messages;
  const std::string logged = s3test::capture_stderr([&] {
    // A successful fetch, logged at debug level.
    FakeEcs ecs(clock_, 6h, "ECS-AUTH-SECRET");
    fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
    fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "ECS-AUTH-SECRET";
    auto found = chain()->get();
    EXPECT_TRUE(found);
    // An endpoint whose answer is not what is expected, but holds secrets.
    LoopbackServer odd;
    odd.server().Get("/creds", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"AccessKeyId\": \"AKIDODD\", \"SecretAccessKey\": \"ODD-SECRET\", \"Expiration\": 5}x",
                      "application/json");
    });
    odd.start();
    fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = odd.url("/creds");
    auto broken = chain()->get();
    EXPECT_FALSE(broken);
    if (!broken) messages.push_back(broken.error().message);
    // STS refusing a web identity token.
    fake_.vars.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    FakeSts sts(clock_, "other", "arn:aws:iam::1:role/r");
    write_text(dir_.sub("token.jwt"), "WEB-IDENTITY-SECRET");
    fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("token.jwt");
    fake_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
    fake_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
    auto refused = chain()->get();
    EXPECT_FALSE(refused);
    if (!refused) messages.push_back(refused.error().message);
  });
  log::set_level(previous);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_THAT(logged, HasSubstr("AWS credentials from ECS container endpoint"));  // debug lines were written
  for (const char* secret : {"ECS-AUTH-SECRET", "ecs-secret-1", "ecs-token-1", "ODD-SECRET", "WEB-IDENTITY-SECRET"}) {
    EXPECT_THAT(logged, Not(HasSubstr(secret)));
    for (const auto& message : messages) EXPECT_THAT(message, Not(HasSubstr(secret)));
  }
}

}  // namespace
}  // namespace datavo::s3
